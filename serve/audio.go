package serve

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/edgespeech/edge/runtime/audio"
)

// loadAudio decodes the spooled upload at path (every format package audio
// recognises by content), refuses audio longer than max before it is
// resampled, and returns it as mono PCM at rate Hz. name is the client's
// file name: messages use it in place of the spool path.
//
// Memory: the decoder holds the decoded clip (all channels at the file's
// rate) before the duration check; a sample budget of max at 48 kHz stereo
// bounds it for every format, compressed ones included. Formats that need
// ffmpeg are refused: it never runs on an upload.
func loadAudio(path, name string, rate int, max time.Duration) ([]float32, *apiError) {
	f, err := os.Open(path)
	if err != nil {
		return nil, internalError()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, internalError()
	}
	budget := audio.Options{NoFFmpeg: true, MaxSamples: int64(max.Seconds()*48000*2) + 1}
	clip, err := budget.Decode(bufio.NewReaderSize(f, 1<<16), st.Size())
	if errors.Is(err, audio.ErrTooLong) {
		return nil, newError(http.StatusRequestEntityTooLarge, typeInvalidRequest, "file", "audio_too_long",
			"the audio decodes to more than %g s at 48 kHz stereo; this server takes at most %g s", max.Seconds(), max.Seconds())
	}
	if err != nil {
		return nil, badAudio(err, path, name)
	}
	if len(clip.Samples) == 0 {
		return nil, badAudio(audio.ErrNoSamples, path, name)
	}
	if d := clip.Duration(); d > max {
		return nil, newError(http.StatusRequestEntityTooLarge, typeInvalidRequest, "file", "audio_too_long",
			"the audio is %.1f s long; this server takes at most %g s", d.Seconds(), max.Seconds())
	}
	mono := clip.Mono()
	if clip.SampleRate == rate {
		return mono, nil
	}
	out, err := audio.Resample(mono, clip.SampleRate, rate)
	if err != nil {
		return nil, badAudio(err, path, name)
	}
	return out, nil
}

// badAudio is a 400 for a file the decoder rejects; the spool path never
// appears in it.
func badAudio(err error, path, name string) *apiError {
	msg := err.Error()
	if path != "" {
		msg = strings.ReplaceAll(msg, path, "the file")
	}
	if errors.Is(err, audio.ErrNoSamples) {
		msg = "the file holds no samples"
	}
	return badRequest("file", "invalid_file", "could not decode %s as audio: %s", quoteName(name), clip(msg, 300))
}

func quoteName(name string) string {
	if name == "" {
		return "the file"
	}
	return fmt.Sprintf("%q", name)
}
