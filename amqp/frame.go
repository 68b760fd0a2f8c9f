package amqp

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

const (
	frameTypeAMQP = 0x00
	frameTypeSASL = 0x01
	// minMaxFrameSize is the largest frame a peer may send before open
	// has negotiated a size (part 2, section 2.4.1).
	minMaxFrameSize = 512
	frameHeaderSize = 8
)

// frame is one frame read off the wire. An empty Body is a heartbeat.
type frame struct {
	Type    uint8
	Channel uint16
	Body    []byte
}

// frameReader reads frames no larger than Max.
type frameReader struct {
	r   *bufio.Reader
	Max uint32
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), Max: minMaxFrameSize}
}

// read returns the next frame. A frame that breaks the framing rules is
// an ErrMalformed error: the connection cannot continue after it.
func (fr *frameReader) read() (frame, error) {
	var h [frameHeaderSize]byte
	if _, err := io.ReadFull(fr.r, h[:]); err != nil {
		return frame{}, err
	}
	size := binary.BigEndian.Uint32(h[0:4])
	doff := uint32(h[4]) * 4
	if size < frameHeaderSize || doff < frameHeaderSize || doff > size {
		return frame{}, malformed("frame size %d with data offset %d", size, doff)
	}
	if size > fr.Max {
		return frame{}, malformed("frame of %d bytes exceeds the maximum of %d", size, fr.Max)
	}
	rest := make([]byte, size-frameHeaderSize)
	if _, err := io.ReadFull(fr.r, rest); err != nil {
		return frame{}, fmt.Errorf("frame body: %w", err)
	}
	return frame{Type: h[5], Channel: binary.BigEndian.Uint16(h[6:8]), Body: rest[doff-frameHeaderSize:]}, nil
}

// readProtocolHeader reads the 8-byte protocol header that starts a
// connection and each layer of it (SASL, then AMQP).
func (fr *frameReader) readProtocolHeader() ([8]byte, error) {
	var h [8]byte
	_, err := io.ReadFull(fr.r, h[:])
	return h, err
}

// encodeFrame returns the frame: header, the performative, then the
// payload.
func encodeFrame(typ uint8, channel uint16, p performative, payload []byte) ([]byte, error) {
	e := encoder{buf: make([]byte, frameHeaderSize, 64+len(payload))}
	if p != nil {
		if err := e.value(p.described()); err != nil {
			return nil, err
		}
	}
	e.buf = append(e.buf, payload...)
	binary.BigEndian.PutUint32(e.buf[0:4], uint32(len(e.buf)))
	e.buf[4] = 2
	e.buf[5] = typ
	binary.BigEndian.PutUint16(e.buf[6:8], channel)
	return e.buf, nil
}

var (
	headerAMQP = [8]byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
	headerSASL = [8]byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
)
