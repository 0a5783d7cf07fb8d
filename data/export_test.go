package data

// SetTextChunk sets the size of the pieces WriteTokens reads, for tests of
// its cutting, and returns a function restoring it.
func SetTextChunk(n int) (restore func()) {
	old := textChunk
	textChunk = n
	return func() { textChunk = old }
}
