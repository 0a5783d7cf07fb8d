//go:build !linux

package checkpoint

import "errors"

// exchange is not available: replaceDir falls back to two renames.
func exchange(a, b string) error { return errors.ErrUnsupported }
