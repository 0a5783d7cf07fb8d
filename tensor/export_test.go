package tensor

// SetCotangentReuse switches Backward's reuse of cotangent buffers on or
// off for a test and returns a function restoring the previous setting.
func SetCotangentReuse(on bool) (restore func()) {
	old := cotangentReuse
	cotangentReuse = on
	return func() { cotangentReuse = old }
}

// CotangentReuses returns how many in-place accumulations and donations
// backward passes have made.
func CotangentReuses() int64 { return cotangentReuses.Load() }

// ParallelSpawned returns how many goroutines kernels have started.
func ParallelSpawned() int64 { return parallelSpawned.Load() }
