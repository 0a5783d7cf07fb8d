package expert_test

import "math"

func mathExp(v float64) float64 { return math.Exp(v) }
