package nn

import (
	"fmt"
	"strings"

	"github.com/gonox/gonox/tensor"
)

// requireBuilt panics, naming the layer fn, when its parameter field p is
// nil: the zero value of a layer (a field of a model left unset) has no
// parameters, and calling it would otherwise fail in a nil dereference.
// ctor names the constructors that build the layer.
func requireBuilt(fn, field string, p *tensor.Tensor, ctor string) {
	if p == nil {
		panic(fmt.Sprintf("%s: %s is nil (the zero %s has no parameters; build it with %s)",
			fn, field, strings.TrimPrefix(fn, "nn."), ctor))
	}
}
