package data

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gonox/gonox/tensor"
)

// FashionMNISTDir is where Debian's dataset-fashion-mnist package installs
// Fashion-MNIST (apt-get install dataset-fashion-mnist).
const FashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// FashionMNISTClasses names the ten Fashion-MNIST labels, in label order.
var FashionMNISTClasses = [10]string{
	"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
	"Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
}

// The file names of the MNIST family (MNIST and Fashion-MNIST use the same
// ones), without the ".gz" that the distributed files carry.
const (
	TrainImagesFile = "train-images-idx3-ubyte"
	TrainLabelsFile = "train-labels-idx1-ubyte"
	TestImagesFile  = "t10k-images-idx3-ubyte"
	TestLabelsFile  = "t10k-labels-idx1-ubyte"
)

// LoadIDX loads an image classification set stored as a pair of IDX files
// (gzipped or not), as MNIST, Fashion-MNIST, KMNIST and EMNIST are: images
// u8[N,rows,cols] become features f32[N,rows,cols] scaled to [0,1] (v/255),
// labels u8[N] become i32[N]. Errors name the file and what is wrong with
// it: besides ReadIDX's, ErrUnsupportedType or ErrDims when a file does not
// hold unsigned bytes of the expected rank, and ErrCountMismatch when the
// two files hold different numbers of examples.
func LoadIDX(imagesPath, labelsPath string) (*InMemory, error) {
	img, err := decodeIDXFile(imagesPath)
	if err != nil {
		return nil, err
	}
	if err := img.expect(imagesPath, "images", 3, "count, rows, columns"); err != nil {
		return nil, err
	}
	lab, err := decodeIDXFile(labelsPath)
	if err != nil {
		return nil, err
	}
	if err := lab.expect(labelsPath, "labels", 1, "count"); err != nil {
		return nil, err
	}
	if img.dims[0] != lab.dims[0] {
		return nil, idxErr(imagesPath, ErrCountMismatch, "%d images but %d labels in %s", img.dims[0], lab.dims[0], labelsPath)
	}
	x := make([]float32, len(img.data))
	for i, v := range img.data {
		x[i] = float32(v) / 255
	}
	y := make([]int32, len(lab.data))
	for i, v := range lab.data {
		y[i] = int32(v)
	}
	return &InMemory{X: tensor.WrapFloat32(x, img.dims...), Y: tensor.WrapInt32(y, lab.dims...)}, nil
}

// expect checks that d holds unsigned bytes of the given rank.
func (d *idx) expect(path, what string, rank int, dimNames string) error {
	if d.typ != IDXUint8 {
		return idxErr(path, ErrUnsupportedType, "%s must be unsigned bytes %s, file has %s", what, IDXUint8, d.typ)
	}
	if len(d.dims) != rank {
		return idxErr(path, ErrDims, "%s need %d dimension(s) (%s), file has %d: %v", what, rank, dimNames, len(d.dims), d.dims)
	}
	return nil
}

// LoadFashionMNIST loads Fashion-MNIST's training set (60,000 images) and
// test set (10,000) from dir, which holds the four standard files
// train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
// t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz (or the same
// names without .gz). Pass FashionMNISTDir for Debian's package. Features
// are f32[N,28,28] in [0,1] (Flatten gives f32[N,784]), labels i32[N] in
// 0..9 (see FashionMNISTClasses).
//
// A missing directory or file is an error that says what to install or
// where to put the files; a label outside 0..9 is an ErrLabelRange error.
func LoadFashionMNIST(dir string) (train, test *InMemory, err error) {
	return loadMNISTFamily("Fashion-MNIST", dir,
		"install Debian's dataset-fashion-mnist package (files in "+FashionMNISTDir+") or download the four files of github.com/zalandoresearch/fashion-mnist into it")
}

// LoadMNIST loads MNIST's training and test sets from dir, which holds the
// four standard files (see LoadFashionMNIST; the names are the same).
func LoadMNIST(dir string) (train, test *InMemory, err error) {
	return loadMNISTFamily("MNIST", dir, "put the four MNIST files (train-images-idx3-ubyte.gz and so on) into it")
}

func loadMNISTFamily(name, dir, hint string) (train, test *InMemory, err error) {
	st, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("data: %s: directory %s does not exist: %s", name, dir, hint)
		}
		return nil, nil, fmt.Errorf("data: %s: %w", name, err)
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("data: %s: %s is not a directory", name, dir)
	}
	find := func(base string) (string, error) {
		for _, p := range []string{base + ".gz", base} {
			p = filepath.Join(dir, p)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		return "", fmt.Errorf("data: %s: no %s.gz (or %s) in %s: %s", name, base, base, dir, hint)
	}
	load := func(imgBase, labBase string) (*InMemory, error) {
		ip, err := find(imgBase)
		if err != nil {
			return nil, err
		}
		lp, err := find(labBase)
		if err != nil {
			return nil, err
		}
		d, err := LoadIDX(ip, lp)
		if err != nil {
			return nil, err
		}
		for i, y := range d.Y.RawInt32() {
			if y > 9 {
				return nil, idxErr(lp, ErrLabelRange, "label %d of example %d is not a class 0..9", y, i)
			}
		}
		return d, nil
	}
	if train, err = load(TrainImagesFile, TrainLabelsFile); err != nil {
		return nil, nil, err
	}
	if test, err = load(TestImagesFile, TestLabelsFile); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}
