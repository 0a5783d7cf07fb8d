package data

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gonox/gonox/tensor"
)

// TokenWindows is a dataset of fixed-length windows over one or more token
// files (shards) taken as one dataset, for next-token models, like Text
// over a sequence in memory: example i is a window of Window() tokens as
// input X and the same window one token later as target Y, so a batch of B
// examples is X i32[B,window] and Y i32[B,window]. The windows of each file
// start every stride tokens (stride = window: disjoint windows; stride 1:
// every offset, nanoGPT's random windows); no window spans two files.
// Examples are numbered file by file in the order given.
//
// Only the windows a batch asks for are read, so the files may be far
// larger than memory, and in a job of several processes each process
// reads only the windows of its share (see Stream). Batch may be called
// from several goroutines at once.
type TokenWindows struct {
	files          []*TokenFile
	window, stride int
	first          []int // first[k]: index of the first window of files[k]; first[len(files)] = Len()
	vocab          int
}

// NewTokenWindows returns the dataset of windows of length window starting
// every stride tokens of each file. The files must share one vocabulary
// size. It panics if window or stride is not positive or there are no
// files; files of different vocabularies are an error naming them.
func NewTokenWindows(files []*TokenFile, window, stride int) (*TokenWindows, error) {
	if window < 1 || stride < 1 {
		panic(fmt.Sprintf("data.NewTokenWindows: window %d and stride %d must be positive", window, stride))
	}
	if len(files) == 0 {
		panic("data.NewTokenWindows: no files")
	}
	d := &TokenWindows{files: files, window: window, stride: stride, first: make([]int, len(files)+1), vocab: files[0].Vocab()}
	for k, f := range files {
		if f.Vocab() != d.vocab {
			return nil, fmt.Errorf("data: %s has a vocabulary of %d tokens, %s of %d: shards must share one", f.Path(), f.Vocab(), files[0].Path(), d.vocab)
		}
		n := int64(0)
		if f.Len() >= int64(window)+1 {
			n = (f.Len()-int64(window)-1)/int64(stride) + 1
		}
		d.first[k+1] = d.first[k] + int(n)
	}
	return d, nil
}

// OpenTokenWindows opens the token files at paths (see OpenTokens) and
// returns their windows, as NewTokenWindows. Close closes the files.
func OpenTokenWindows(paths []string, window, stride int) (*TokenWindows, error) {
	var files []*TokenFile
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, p := range paths {
		f, err := OpenTokens(p)
		if err != nil {
			closeAll()
			return nil, err
		}
		files = append(files, f)
	}
	d, err := NewTokenWindows(files, window, stride)
	if err != nil {
		closeAll()
	}
	return d, err
}

// Len returns the number of windows of all files.
func (d *TokenWindows) Len() int { return d.first[len(d.files)] }

// Window returns the length of each window.
func (d *TokenWindows) Window() int { return d.window }

// Vocab returns the vocabulary size of the files.
func (d *TokenWindows) Vocab() int { return d.vocab }

// Files returns the files, in order.
func (d *TokenWindows) Files() []*TokenFile { return d.files }

// Locate returns the file of window i and the offset of its first token
// in that file. It panics if i is outside [0, Len()).
func (d *TokenWindows) Locate(i int) (file int, offset int64) {
	if i < 0 || i >= d.Len() {
		panic(fmt.Sprintf("data.TokenWindows: index %d out of range [0,%d)", i, d.Len()))
	}
	k := sort.Search(len(d.files), func(k int) bool { return d.first[k+1] > i })
	return k, int64(i-d.first[k]) * int64(d.stride)
}

// Batch reads the windows at indices as X and Y, both i32[len(indices),
// window]. A token outside the vocabulary, or a file that cannot be read,
// is an error naming the file and the offset. It panics, naming the index,
// if one is outside [0, Len()).
func (d *TokenWindows) Batch(indices []int) (Batch, error) {
	w := d.window
	x := make([]int32, len(indices)*w)
	y := make([]int32, len(indices)*w)
	row := make([]int32, w+1)
	for i, ix := range indices {
		k, off := d.Locate(ix)
		if err := d.files[k].Read(row, off); err != nil {
			return Batch{}, err
		}
		copy(x[i*w:], row[:w])
		copy(y[i*w:], row[1:])
	}
	return Batch{X: tensor.WrapInt32(x, len(indices), w), Y: tensor.WrapInt32(y, len(indices), w), Indices: indices}, nil
}

// Close closes the files.
func (d *TokenWindows) Close() error {
	var errs []error
	for _, f := range d.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
