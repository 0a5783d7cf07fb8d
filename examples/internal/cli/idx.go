package cli

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gonox/gonox/data"
)

// Bounds of an IDX dataset (an example's -data DIR): the files on disk, and the
// elements (pixels and labels) their headers announce: each becomes a
// float32 or an int32.
const (
	MaxIDXFileBytes = 1 << 30
	MaxIDXElements  = 1 << 28
)

// CheckIDXDir checks the four IDX files of dir before they are read: each
// a regular file (not a FIFO, which would block, nor a device) of at most
// MaxIDXFileBytes, and the headers announcing at most MaxIDXElements in
// all, so that a bad file is an error rather than an out-of-memory kill.
// Missing files are left to package data, whose error says which.
func CheckIDXDir(dir string) error {
	elements := int64(0)
	for _, base := range []string{data.TrainImagesFile, data.TrainLabelsFile, data.TestImagesFile, data.TestLabelsFile} {
		for _, p := range []string{base + ".gz", base} {
			p = filepath.Join(dir, p)
			st, err := os.Stat(p)
			if err != nil {
				continue
			}
			if !st.Mode().IsRegular() {
				return fmt.Errorf("-data %s: %s is not a regular file", dir, p)
			}
			if st.Size() > MaxIDXFileBytes {
				return fmt.Errorf("-data %s: %s has %d bytes, more than the %s an example reads", dir, p, st.Size(), Size(MaxIDXFileBytes))
			}
			n, err := idxElements(p)
			if err != nil {
				return nil // package data reports what is wrong with it
			}
			elements += n
			if elements > MaxIDXElements {
				return fmt.Errorf("-data %s: the headers announce %d elements up to %s, more than the %d an example loads", dir, elements, filepath.Base(p), MaxIDXElements)
			}
			break
		}
	}
	return nil
}

// idxElements reads the header of an IDX file (gzipped or not) and
// returns the number of elements it announces.
func idxElements(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return 0, err
		}
		defer zr.Close()
		r = zr
	}
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, err
	}
	rank := int(head[3])
	if head[0] != 0 || head[1] != 0 || rank == 0 || rank > 16 {
		return 0, fmt.Errorf("not an IDX header")
	}
	dims := make([]uint32, rank)
	if err := binary.Read(r, binary.BigEndian, dims); err != nil {
		return 0, err
	}
	n := int64(1)
	for _, d := range dims {
		n *= int64(d)
		if n > MaxIDXElements {
			return n, nil
		}
	}
	return n, nil
}
