/*
 * pcaudio_stub.c: a no-audio stand-in for libpcaudio.so.0.
 *
 * espeak-ng links libpcaudio for live playback; the real library pulls in
 * ALSA/PulseAudio, which the GPU host lacks. When espeak-ng writes to a file or
 * stdout it never opens an audio device, so these entry points are only needed
 * for the dynamic linker. Every function reports failure (no device).
 *
 * Build: gcc -shared -fPIC -O2 -Wl,-soname,libpcaudio.so.0 -o libpcaudio.so.0 pcaudio_stub.c
 */
#include <stddef.h>
#include <stdint.h>

struct audio_object;

struct audio_object *create_audio_device_object(const char *device, const char *app, const char *desc)
{
	(void)device; (void)app; (void)desc;
	return NULL;
}
int audio_object_open(struct audio_object *o, int format, uint32_t rate, uint8_t channels)
{
	(void)o; (void)format; (void)rate; (void)channels;
	return -1;
}
void audio_object_close(struct audio_object *o) { (void)o; }
void audio_object_destroy(struct audio_object *o) { (void)o; }
int audio_object_write(struct audio_object *o, const void *data, size_t bytes)
{
	(void)o; (void)data; (void)bytes;
	return -1;
}
int audio_object_drain(struct audio_object *o) { (void)o; return -1; }
int audio_object_flush(struct audio_object *o) { (void)o; return -1; }
const char *audio_object_strerror(struct audio_object *o, int error)
{
	(void)o; (void)error;
	return "no audio device (pcaudio stub)";
}
