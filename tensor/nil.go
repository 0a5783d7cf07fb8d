package tensor

import (
	"fmt"
	"strings"
)

// checkNil panics, naming op and the operand, if one of xs is nil; names
// lists the operands' names, separated by spaces. Every public op calls it
// first, so a nil operand is reported as the op's error, not as a nil
// pointer dereference somewhere inside.
func checkNil(op, names string, xs ...*Tensor) {
	for i, x := range xs {
		if x == nil {
			panic(fmt.Sprintf("%s: operand %s is nil", op, strings.Fields(names)[i]))
		}
		if x.donated || x.primal != nil && x.IsDonated() {
			donatedPanic(op, strings.Fields(names)[i], x)
		}
	}
}

// checkNotNil panics, naming op, if an element of the operand list xs
// (named name) is nil.
func checkNotNil(op, name string, xs []*Tensor) {
	for i, x := range xs {
		if x == nil {
			panic(fmt.Sprintf("%s: operand %s[%d] is nil", op, name, i))
		}
		if x.IsDonated() {
			donatedPanic(op, fmt.Sprintf("%s[%d]", name, i), x)
		}
	}
}
