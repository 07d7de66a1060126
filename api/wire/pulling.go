package wire

import (
	"fmt"
	"strings"
)

// PullProgress is how far a pull of one image has come: the bytes of its layers and
// config fetched so far (those already present count whole) of all it needs. Total is 0
// until the image's manifest is fetched.
type PullProgress struct {
	Done, Total int64
}

// pullingPrefix opens the waiting message of a container whose image is being pulled.
const pullingPrefix = "Pulling image "

// Message is the waiting message of a container whose image is being pulled, as the
// pod's status carries it with the reason ContainerCreating: `Pulling image "x": 12.3 MB
// of 45.6 MB`, or `Pulling image "x"` before the total is known.
func (p PullProgress) Message(image string) string {
	msg := fmt.Sprintf("%s%q", pullingPrefix, image)
	if p.Total <= 0 {
		return msg
	}
	return fmt.Sprintf("%s: %s of %s", msg, bytesSI(p.Done), bytesSI(p.Total))
}

// PullingBytes reads a Message back as `ps -o wide` shows it: "12.3MB/45.6MB", "" before
// the total is known. ok is false for any other message.
func PullingBytes(msg string) (short string, ok bool) {
	if !strings.HasPrefix(msg, pullingPrefix) {
		return "", false
	}
	i := strings.LastIndex(msg, `": `)
	if i < 0 {
		return "", strings.HasSuffix(msg, `"`)
	}
	done, total, found := strings.Cut(msg[i+3:], " of ")
	if !found {
		return "", false
	}
	return strings.ReplaceAll(done, " ", "") + "/" + strings.ReplaceAll(total, " ", ""), true
}

// bytesSI spells n bytes in decimal units with one decimal, as docker pull and ctr
// pull count them: 912 B, 12.3 kB, 45.6 MB, 1.2 GB.
func bytesSI(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1000, "kB"
	for _, u := range []string{"MB", "GB", "TB"} {
		if v < 999.95 {
			break
		}
		v, unit = v/1000, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}
