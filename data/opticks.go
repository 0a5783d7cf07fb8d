package data

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

// Isaac Newton's Opticks (1730), public domain, gzipped UTF-8 text; where
// it comes from is in opticks.PROVENANCE.txt.
//
//go:embed opticks.txt.gz
var opticksGZ []byte

var opticksOnce = sync.OnceValues(func() (string, error) { return gunzipText("opticks.txt.gz", opticksGZ) })

// Opticks returns the text of Isaac Newton's Opticks (fourth edition,
// 1730; 567,038 characters, 91 distinct), embedded in the module so that
// it works offline: a public-domain corpus for character-level language
// models. The text is the copy the Go distribution ships as
// src/testdata/Isaac.Newton-Opticks.txt; see opticks.PROVENANCE.txt in this
// package's directory. It is decompressed once.
func Opticks() string {
	s, err := opticksOnce()
	if err != nil {
		panic(err) // the embedded file is part of the program; tests read it
	}
	return s
}

// gunzipText decompresses gzipped UTF-8 text, naming what in errors.
func gunzipText(what string, gz []byte) (string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return "", fmt.Errorf("data: %s: %w", what, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return "", fmt.Errorf("data: %s: %w", what, err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("data: %s: not valid UTF-8", what)
	}
	return string(b), nil
}
