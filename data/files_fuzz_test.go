package data

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenTokens opens arbitrary bytes as a token file and reads every
// window: errors, never a panic, and no token at or above the vocabulary.
func FuzzOpenTokens(f *testing.F) {
	f.Add(tokenFileBytes(tokenMagic, 1, 2, 10, 4, 8))
	f.Add(tokenFileBytes(tokenMagic, 1, 4, 1<<20, 3, 12))
	f.Add(tokenFileBytes(tokenMagic, 1, 1, 3, 5, 5))
	f.Add(tokenFileBytes(tokenMagic, 1, 2, 10, 1<<62, 8))
	f.Add([]byte("GONOXTOK"))
	f.Add([]byte{})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "f.tok")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		tf, err := OpenTokens(path)
		if err != nil {
			if !bytes.Contains([]byte(err.Error()), []byte(path)) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		defer tf.Close()
		ids := make([]int32, min(tf.Len(), 64))
		for off := int64(0); off+int64(len(ids)) <= tf.Len() && len(ids) > 0; off += int64(len(ids)) {
			if err := tf.Read(ids, off); err != nil {
				continue
			}
			for _, id := range ids {
				if id < 0 || int(id) >= tf.Vocab() {
					t.Fatalf("id %d read from a vocabulary of %d", id, tf.Vocab())
				}
			}
		}
	})
}

// FuzzOpenImages opens arbitrary bytes as an image file and reads every
// image: errors, never a panic, and labels below the classes.
func FuzzOpenImages(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "seed.img")
	iw, err := CreateImages(path, Uint8, 2, 2, 1, 3)
	if err != nil {
		f.Fatal(err)
	}
	_ = iw.WriteUint8(2, []uint8{1, 2, 3, 4})
	if err := iw.Close(); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Add(seed[:47])
	f.Add(append(seed, 1, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "f.img")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := OpenImages(path)
		if err != nil {
			return
		}
		defer d.Close()
		for i := range min(d.Len(), 16) {
			bt, err := d.Batch([]int{i})
			if err != nil {
				continue
			}
			if y := bt.Y.Ints()[0]; y < 0 || y >= d.Classes() {
				t.Fatalf("label %d of %d classes", y, d.Classes())
			}
		}
	})
}
