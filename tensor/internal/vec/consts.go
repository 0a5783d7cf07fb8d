package vec

import "math"

var (
	negInf = math.Inf(-1)
	posInf = math.Inf(1)
)
