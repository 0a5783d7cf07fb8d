package main

import (
	"fmt"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/tensor"
)

// loadData returns the train and test sets.
func loadData(name string, key tensor.Key) (train, test *data.InMemory, err error) {
	switch name {
	case "digits":
		train, test = data.DigitsSplit(key, 0.2)
		return train, test, nil
	case "fashion-mnist":
		if err := cli.CheckIDXDir(data.FashionMNISTDir); err != nil {
			return nil, nil, err
		}
		train, test, err = data.LoadFashionMNIST(data.FashionMNISTDir)
		if err != nil {
			err = fmt.Errorf("%w (on Debian: apt-get install dataset-fashion-mnist)", err)
		}
	default:
		if err := cli.CheckIDXDir(name); err != nil {
			return nil, nil, err
		}
		train, test, err = data.LoadMNIST(name)
	}
	if err != nil {
		return nil, nil, err
	}
	return train.Flatten(), test.Flatten(), nil
}
