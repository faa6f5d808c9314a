package audio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// viaFFmpeg decodes in with ffmpeg: a file by its path, a stream through a
// temporary file (containers such as MP4 need to seek). ffmpeg writes the
// first audio stream as 32-bit float WAV to a pipe, which decodeWAV reads;
// the rate and channels are the stream's own.
func (o Options) viaFFmpeg(in *input, format string) (*Clip, error) {
	if o.NoFFmpeg {
		return nil, fmt.Errorf("audio: %s: no native decoder, and ffmpeg is turned off", format)
	}
	exe := o.FFmpeg
	if exe == "" {
		exe = "ffmpeg"
	}
	bin, err := exec.LookPath(exe)
	if err != nil {
		return nil, fmt.Errorf("audio: %s needs ffmpeg, and %q is not found (%v): install ffmpeg (apt-get install ffmpeg, brew install ffmpeg) or convert the audio to WAV, FLAC, MP3, Ogg Vorbis or Ogg Opus", format, exe, err)
	}
	src := in.path
	if src == "" {
		if in.rec == nil || in.rec.full {
			return nil, fmt.Errorf("audio: %s needs ffmpeg, and the stream's first bytes were not kept for it: give it as a file", format)
		}
		tmp, err := os.CreateTemp("", "edge-audio-*")
		if err != nil {
			return nil, fmt.Errorf("audio: spooling the stream for ffmpeg: %w", err)
		}
		defer os.Remove(tmp.Name())
		_, err = io.Copy(tmp, io.MultiReader(bytes.NewReader(in.rec.buf), in.rec.r))
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("audio: spooling the stream for ffmpeg: %w", err)
		}
		src = tmp.Name()
	}
	if abs, err := filepath.Abs(src); err == nil {
		src = abs
	}
	cmd := exec.Command(bin, "-nostdin", "-hide_banner", "-loglevel", "error",
		"-i", "file:"+src, "-map", "0:a:0", "-vn", "-f", "wav", "-c:a", "pcm_f32le", "-")
	var stderr tailBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("audio: running ffmpeg: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("audio: running %s: %w", bin, err)
	}
	clip, derr := decodeWAV(newFileInput(stdout, -1, ""), o)
	if errors.Is(derr, errStreamClosed) {
		// The Stream reading the decode was closed: stop ffmpeg rather than
		// decoding the rest of the file for nothing.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, derr
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	if werr != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = werr.Error()
		}
		return nil, fmt.Errorf("audio: ffmpeg could not decode this %s: %s", format, msg)
	}
	if derr != nil {
		return nil, fmt.Errorf("audio: reading ffmpeg's output for %s: %w", format, derr)
	}
	clip.Format = format + " via ffmpeg"
	return clip, nil
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
