package parallel

// FoldSmall makes the DP step fold weight gradients of any size (the
// tests' models are small; see foldMinPart) until restore is called.
func FoldSmall() (restore func()) {
	old := foldMinPart
	foldMinPart = 0
	return func() { foldMinPart = old }
}
