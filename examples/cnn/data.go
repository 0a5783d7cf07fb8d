package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/tensor"
)

// dataset is a train/test pair of images f32[N,H,W,1] in [0,1] with their
// labels, and the names of the classes.
type dataset struct {
	name        string
	train, test *data.InMemory
	classes     []string
}

// digitNames are the classes of the embedded digits.
var digitNames = []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

// loadData returns the train and test sets of -data, and a note to print
// when the default dataset is not installed in fashionDir and the embedded
// digits are used instead (explicit is true when -data was given: then a
// missing dataset is an error).
func loadData(name string, explicit bool, fashionDir string, key tensor.Key) (ds dataset, note string, err error) {
	switch name {
	case "digits":
		return digits(key), "", nil
	case "fashion-mnist":
		if !explicit && !installed(fashionDir) {
			return digits(key), fmt.Sprintf("note: Fashion-MNIST is not installed in %s (apt-get install dataset-fashion-mnist); training on the embedded 8×8 digits instead", fashionDir), nil
		}
		if err := cli.CheckIDXDir(fashionDir); err != nil {
			return ds, "", err
		}
		train, test, err := data.LoadFashionMNIST(fashionDir)
		if err != nil {
			return ds, "", fmt.Errorf("%w (on Debian: apt-get install dataset-fashion-mnist)", err)
		}
		return dataset{name, images(train), images(test), data.FashionMNISTClasses[:]}, "", nil
	default:
		if err := cli.CheckIDXDir(name); err != nil {
			return ds, "", err
		}
		train, test, err := data.LoadMNIST(name)
		if err != nil {
			return ds, "", err
		}
		return dataset{name, images(train), images(test), digitNames}, "", nil
	}
}

// installed reports whether dir exists; what is wrong inside it is for
// the loader to say.
func installed(dir string) bool {
	_, err := os.Stat(dir)
	return !errors.Is(err, fs.ErrNotExist)
}

// digits returns the embedded 8×8 digits, split 80/20 by key, as images.
func digits(key tensor.Key) dataset {
	train, test := data.DigitsSplit(key, 0.2)
	return dataset{"digits", images(train), images(test), digitNames}
}

// images reshapes the features of d to f32[N,H,W,1], square images if
// they are flat.
func images(d *data.InMemory) *data.InMemory {
	x := d.X
	if x.Rank() == 2 {
		side := 1
		for side*side < x.Dim(1) {
			side++
		}
		x = tensor.Reshape(x, x.Dim(0), side, side)
	}
	return data.FromTensors(tensor.Reshape(x, x.Dim(0), x.Dim(1), x.Dim(2), 1), d.Y)
}
