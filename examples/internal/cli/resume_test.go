package cli

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/checkpoint"
)

func TestCompareRun(t *testing.T) {
	type rec struct {
		Heads int
		Text  string
		Steps int
		Other []int
	}
	settings := map[string]Setting{
		"Heads": {Flag: "-heads"},
		"Text":  {Flag: "-text", Refused: func(d checkpoint.Difference) string { return "-text: another text" }},
		"Steps": {Flag: "-steps", Changed: func(d checkpoint.Difference) string { return fmt.Sprintf("steps %v → %v", d.Saved, d.Current) }},
	}
	saved := rec{Heads: 4, Text: "a", Steps: 400, Other: []int{1}}

	notes, err := CompareRun("ck", 400, checkpoint.DiffMetadata(saved, rec{Heads: 4, Text: "a", Steps: 900, Other: []int{1}}), settings)
	require.NoError(t, err)
	assert.Equal(t, []string{"steps 400 → 900"}, notes)

	_, err = CompareRun("ck", 400, checkpoint.DiffMetadata(saved, rec{Heads: 8, Text: "b", Steps: 900, Other: []int{2}}), settings)
	var mm *MismatchError
	require.ErrorAs(t, err, &mm)
	assert.Equal(t, []string{
		"-heads: the checkpoint was saved with 4, this run has 8",
		"-text: another text",
		"Other: saved [1], now [2]", // a setting without an entry is refused
	}, mm.What)
	assert.Contains(t, err.Error(), "-ckpt ck holds step 400 of another run: -heads: the checkpoint was saved with 4, this run has 8; -text: another text; ")
}

func TestShow(t *testing.T) {
	assert.Equal(t, "f32", show("f32"))
	assert.Equal(t, `""`, show(""))
	assert.Equal(t, "0.003", show(0.003))
	assert.Equal(t, "[64,16,10]", show([]int{64, 16, 10}))
}
