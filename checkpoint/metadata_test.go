package checkpoint

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// runConfig is a program's record: model, data and schedule settings.
type runConfig struct {
	Model struct {
		Dim, Heads, TopK int
	}
	Vocab   string
	LR      float64
	Steps   int
	Mesh    []int
	Scratch string `json:"-"` // not saved, not compared
	private int
}

var runSchema = Schema{Kind: "test-run", Version: 2}

func newRunConfig() runConfig {
	var c runConfig
	c.Model.Dim, c.Model.Heads, c.Model.TopK = 64, 4, 2
	c.Vocab, c.LR, c.Steps, c.Mesh = "abcz", 0.003, 500, []int{2, 4}
	return c
}

func TestMetadataRoundTrip(t *testing.T) {
	dir := t.TempDir()
	cfg := newRunConfig()
	before := time.Now().UTC()
	require.NoError(t, Save(dir, 7, tinyAt(7), WithMetadata(runSchema, cfg)))

	var got runConfig
	info, err := ReadMetadata(dir, 7, runSchema, &got)
	require.NoError(t, err)
	cfg.Scratch, cfg.private = "", 0
	require.Equal(t, cfg, got)
	require.Equal(t, 7, info.Step)
	require.Equal(t, runSchema, info.Schema)
	require.Equal(t, GonoxVersion(), info.Gonox)
	require.True(t, strings.HasPrefix(info.Gonox, "(devel)"), "a test binary of the gonox module: %q", info.Gonox)
	require.False(t, info.Time.Before(before.Add(-time.Second)), "time %v", info.Time)
	require.JSONEq(t, `{"Model":{"Dim":64,"Heads":4,"TopK":2},"Vocab":"abcz","LR":0.003,"Steps":500,"Mesh":[2,4]}`, string(info.Value))

	// The manifest says version 3 and holds the record as written.
	m := loadManifest(t, dir, 7)
	require.Equal(t, formatVersionMetadata, m.Version)
	require.Equal(t, "test-run", m.Metadata.Kind)
	require.Equal(t, 2, m.Metadata.Version)
	// The tensors restore as they do without metadata.
	back, err := Restore(dir, 7, tinyAt(0), nil)
	require.NoError(t, err)
	requireBitExact(t, tinyAt(7), back)
	// nil: the schema is checked, nothing decoded.
	info, err = ReadMetadata(dir, 7, runSchema, nil)
	require.NoError(t, err)
	require.Equal(t, runSchema, info.Schema)

	// A step without a record stays at version 1.
	require.NoError(t, Save(dir, 8, tinyAt(8)))
	require.Equal(t, formatVersion, loadManifest(t, dir, 8).Version)
}

// TestMetadataStrict: every way a record can fail to be the program's is
// an ErrMismatch naming the step's manifest.json and what differs.
func TestMetadataStrict(t *testing.T) {
	type v1 struct { // version 1 had no TopK and called the vocabulary Chars
		Model struct{ Dim, Heads int }
		Chars string
	}
	type extra struct {
		runConfig
		Dropout float64
	}
	type wrongType struct {
		Model struct{ Dim, Heads string }
	}
	cases := []struct {
		name   string
		save   []SaveOption
		schema Schema
		msg    string
	}{
		{"no record", nil, runSchema, `the step has no metadata record (it was saved without one), the program reads "test-run" v2`},
		{"other kind", []SaveOption{WithMetadata(Schema{"other-run", 2}, newRunConfig())}, runSchema, `the metadata record is of kind "other-run", the program reads "test-run"`},
		{"newer version", []SaveOption{WithMetadata(Schema{"test-run", 3}, newRunConfig())}, runSchema, `the metadata record is "test-run" v3, newer than this program reads (up to version 2): it was saved by gonox (devel)`},
		{"unknown field", []SaveOption{WithMetadata(runSchema, extra{newRunConfig(), 0.1})}, runSchema, `metadata "test-run" v2: the record has a field "Dropout" that checkpoint.runConfig lacks`},
		{"older version, renamed field", []SaveOption{WithMetadata(Schema{"test-run", 1}, v1{Chars: "ab"})}, runSchema, `the record has a field "Chars" that checkpoint.runConfig lacks (the record is version 1, older than 2: decode it with that version's type)`},
		{"wrong type", []SaveOption{WithMetadata(runSchema, wrongType{})}, runSchema, `metadata "test-run" v2: field Model.Dim: the record has a JSON string, checkpoint.runConfig needs int`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, Save(dir, 3, tinyAt(3), c.save...))
			var got runConfig
			_, err := ReadMetadata(dir, 3, c.schema, &got)
			require.ErrorIs(t, err, ErrMismatch)
			require.ErrorContains(t, err, "checkpoint: metadata step 3 ("+stepDir(dir, 3)+"): file manifest.json: does not match: ")
			require.ErrorContains(t, err, c.msg)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, manifestName, e.File)
		})
	}

	// An older record decodes into its own version's type, and into the
	// current type when its fields are a subset: missing fields keep the
	// values v has (here the defaults an old record implies).
	dir := t.TempDir()
	old := v1{Chars: "xy"}
	old.Model.Dim, old.Model.Heads = 32, 2
	require.NoError(t, Save(dir, 1, tinyAt(1), WithMetadata(Schema{"test-run", 1}, old)))
	var back v1
	info, err := ReadMetadata(dir, 1, Schema{"test-run", 1}, &back)
	require.NoError(t, err)
	require.Equal(t, old, back)
	require.Equal(t, 1, info.Schema.Version)
	type v2 struct { // version 2 added TopK
		Model struct{ Dim, Heads, TopK int }
		Chars string
	}
	defaults := v2{}
	defaults.Model.TopK = 2
	_, err = ReadMetadata(dir, 1, Schema{"test-run", 2}, &defaults)
	require.NoError(t, err)
	require.Equal(t, 32, defaults.Model.Dim)
	require.Equal(t, 2, defaults.Model.TopK, "a field the old record lacks keeps its default")
}

// TestMetadataManifestEdits: a record edited by hand into something Save
// never writes is a corrupt manifest, and a manifest of a format version
// this package does not know says so.
func TestMetadataManifestEdits(t *testing.T) {
	cases := []struct {
		name string
		edit func(m map[string]any)
		msg  string
	}{
		{"duplicate key", func(m map[string]any) {
			m["metadata"].(map[string]any)["value"] = json.RawMessage(`{"Model":{"Dim":1,"Dim":2}}`)
		}, `metadata: value: key "Dim" appears twice in an object`},
		{"value not an object", func(m map[string]any) { m["metadata"].(map[string]any)["value"] = 3 }, "metadata: value: not a JSON object"},
		{"no value", func(m map[string]any) { delete(m["metadata"].(map[string]any), "value") }, "metadata: no value"},
		{"empty kind", func(m map[string]any) { m["metadata"].(map[string]any)["kind"] = "" }, "the schema has no Kind"},
		{"version 0", func(m map[string]any) { m["metadata"].(map[string]any)["version"] = 0 }, "versions count from 1"},
		{"record in version 2", func(m map[string]any) { m["version"] = 2 }, "a metadata record needs format version 3, the manifest has 2"},
		{"format version 5", func(m map[string]any) { m["version"] = 5 }, "format version 5, this package reads versions 1 to 4"},
		{"unknown record field", func(m map[string]any) { m["metadata"].(map[string]any)["extra"] = 1 }, `unknown field "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, Save(dir, 3, tinyAt(3), WithMetadata(runSchema, newRunConfig())))
			name := filepath.Join(stepDir(dir, 3), manifestName)
			data, err := os.ReadFile(name)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, json.Unmarshal(data, &m))
			c.edit(m)
			data, err = json.Marshal(m)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(name, data, 0o644))
			_, err = ReadMetadata(dir, 3, runSchema, &runConfig{})
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, "checkpoint: metadata step 3 ("+stepDir(dir, 3)+"): file manifest.json: corrupt checkpoint: ")
			require.ErrorContains(t, err, c.msg)
			_, err = Restore(dir, 3, tinyAt(0), nil)
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func TestCheckJSONObject(t *testing.T) {
	for _, ok := range []string{`{}`, `{"a":1}`, `{"a":{"a":1},"b":[{"a":1},{"a":2}]}`, `{"a":[[{"x":1}],[]],"b":{}}`, ` {"a" : null } `} {
		require.NoError(t, checkJSONObject([]byte(ok)), ok)
	}
	for bad, msg := range map[string]string{
		`[]`:                        "not a JSON object",
		`{"a":1,"a":2}`:             `key "a" appears twice`,
		`{"x":[{"a":1,"a":1}]}`:     `key "a" appears twice`,
		`{"x":{"y":{}},"x":1}`:      `key "x" appears twice`,
		`{"a":[1,{"b":2}],"a":{}}`:  `key "a" appears twice`,
		`{} {}`:                     "data after the object",
		`{"a":`:                     "EOF",
		``:                          "EOF",
		`{"a":1,"b":{"c":1,"c":1}}`: `key "c" appears twice`,
	} {
		require.ErrorContains(t, checkJSONObject([]byte(bad)), msg, bad)
	}
}

// TestSaveMetadataRefused: a record Save cannot write is an error before
// anything is written.
func TestSaveMetadataRefused(t *testing.T) {
	big := map[string]string{"x": strings.Repeat("a", maxMetadataBytes)}
	cases := []struct {
		name string
		s    Schema
		v    any
		msg  string
	}{
		{"no kind", Schema{Version: 1}, newRunConfig(), "the schema has no Kind"},
		{"version 0", Schema{Kind: "k"}, newRunConfig(), `schema "k" v0: versions count from 1`},
		{"control character", Schema{Kind: "a\nb", Version: 1}, newRunConfig(), "without control characters"},
		{"not an object", runSchema, 42, `metadata "test-run" v2: int encodes as 42, want a JSON object (a struct or a map)`},
		{"nil", runSchema, nil, "encodes as null"},
		{"NaN", runSchema, map[string]float64{"lr": math.NaN()}, "json: unsupported value: NaN"},
		{"too large", runSchema, big, "the limit is 1048576"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			err := Save(dir, 1, tinyAt(1), WithMetadata(c.s, c.v))
			require.ErrorContains(t, err, "checkpoint: save step 1: ")
			require.ErrorContains(t, err, c.msg)
			require.Empty(t, listDir(t, dir))
			_, err = NewManager(dir, ManagerOptions{Metadata: c.v, MetadataSchema: c.s})
			if c.v != nil {
				require.ErrorContains(t, err, c.msg)
			}
		})
	}
	// Reading with an invalid schema or a non-pointer is a programmer error.
	require.PanicsWithValue(t, "checkpoint.ReadMetadata: decoding into checkpoint.runConfig, want a non-nil pointer", func() {
		_, _ = ReadMetadata(t.TempDir(), 1, runSchema, runConfig{})
	})
	require.PanicsWithValue(t, "checkpoint.ReadMetadata: the schema has no Kind", func() {
		_, _ = ReadMetadata(t.TempDir(), 1, Schema{}, nil)
	})
	require.PanicsWithValue(t, "checkpoint.CheckMetadata: saved is nil, want a pointer to decode the record into", func() {
		CheckMetadata(runSchema, nil, nil)
	})
}

// TestManagerMetadata: a Manager saves its record with every step, as it
// was when Save was called, also in the background.
func TestManagerMetadata(t *testing.T) {
	dir := t.TempDir()
	cfg := newRunConfig()
	m, err := NewManager(dir, ManagerOptions{Async: true, KeepLatest: 2, Metadata: &cfg, MetadataSchema: runSchema})
	require.NoError(t, err)
	for step := 1; step <= 3; step++ {
		cfg.Steps = 100 * step
		_, err := m.Save(step, tinyAt(step), nil)
		require.NoError(t, err)
		cfg.Steps = -1 // changed while the save runs: not what was saved
	}
	require.NoError(t, m.Close())
	require.Equal(t, []int{2, 3}, m.Steps())
	for _, step := range m.Steps() {
		var got runConfig
		_, err := ReadMetadata(dir, step, runSchema, &got)
		require.NoError(t, err)
		require.Equal(t, 100*step, got.Steps)
		require.Equal(t, "abcz", got.Vocab)
	}
}

func TestDiffMetadata(t *testing.T) {
	type Optim struct {
		LR     float64
		Warmup int
	}
	type rec struct {
		Optim   // embedded: LR and Warmup are settings of their own
		Model   struct{ Dim, Heads int }
		Vocab   string
		Mesh    []int
		Extra   map[string]int
		When    time.Time
		Ptr     *Optim
		Any     any
		Skip    int `json:"-"`
		hidden  int
		Renamed int `json:"renamed"`
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := rec{Optim: Optim{0.1, 10}, Vocab: "abz", Mesh: []int{2, 4}, Extra: map[string]int{"a": 1}, When: t0, Ptr: &Optim{1, 2}, Any: 3.0, Renamed: 5}
	base.Model.Dim, base.Model.Heads = 64, 4
	require.Empty(t, DiffMetadata(base, base))
	same := base
	same.Skip, same.hidden = 9, 9
	same.Ptr = &Optim{1, 2} // another pointer to an equal value
	same.Mesh = []int{2, 4}
	require.Empty(t, DiffMetadata(base, same), "fields encoding/json leaves out are not compared")

	cur := base
	cur.LR = 0.2
	cur.Model.Heads = 8
	cur.Vocab = "ab€"
	cur.Mesh = []int{8}
	cur.Extra = map[string]int{"a": 2}
	cur.When = t0.Add(time.Second)
	cur.Ptr = nil
	cur.Any = "x"
	cur.Renamed = 6
	got := DiffMetadata(base, cur)
	var lines []string
	for _, d := range got {
		lines = append(lines, d.String())
	}
	require.Equal(t, []string{
		`LR: saved 0.1, now 0.2`,
		`Model.Heads: saved 4, now 8`,
		`Vocab: saved "abz", now "ab€"`,
		`Mesh: saved [2,4], now [8]`,
		`Extra: saved {"a":1}, now {"a":2}`,
		`When: saved "2026-01-02T03:04:05Z", now "2026-01-02T03:04:06Z"`,
		`Ptr: saved {"LR":1,"Warmup":2}, now null`,
		`Any: saved 3, now "x"`,
		`Renamed: saved 5, now 6`,
	}, lines)
	require.Equal(t, 4, got[1].Saved)
	require.Equal(t, 8, got[1].Current)

	// Nested pointers are walked; a whole-record leaf is named (record).
	a, b := &base, &cur
	require.Equal(t, "Model.Heads", DiffMetadata(a, b)[1].Setting)
	require.Equal(t, []Difference{{Setting: "(record)", Saved: 1, Current: 2}}, DiffMetadata(1, 2))
}

// TestCheckMetadata: the record is checked before any tensor is read, so
// a setting that changes shapes is reported by the program's check, and
// a refusal comes back as the program's error.
func TestCheckMetadata(t *testing.T) {
	dir := t.TempDir()
	cfg := newRunConfig()
	require.NoError(t, Save(dir, 5, tinyAt(5), WithMetadata(runSchema, cfg)))

	errRefused := errors.New("refused")
	cur := cfg
	cur.Model.Dim = 128 // the program's model would have other shapes
	var saved runConfig
	var seen MetadataInfo
	check := func(info MetadataInfo) error {
		seen = info
		if d := DiffMetadata(saved, cur); len(d) > 0 {
			return errors.Join(errRefused, errors.New(d[0].String()))
		}
		return nil
	}
	like := tiny{W: tensor.Zeros(tensor.Float32, 16, 32), Step: tinyAt(0).Step} // shapes that do not fit
	_, err := Restore(dir, 5, like, nil, CheckMetadata(runSchema, &saved, check))
	require.ErrorIs(t, err, errRefused)
	require.NotErrorIs(t, err, ErrMismatch)
	require.ErrorContains(t, err, "checkpoint: restore step 5 ("+stepDir(dir, 5)+"): refused\nModel.Dim: saved 64, now 128")
	require.Equal(t, 5, seen.Step)
	require.Equal(t, runSchema, seen.Schema)

	// Accepted: the tensors restore; saved holds the record.
	saved = runConfig{}
	cur = cfg
	got, err := Restore(dir, 5, tinyAt(0), nil, CheckMetadata(runSchema, &saved, check))
	require.NoError(t, err)
	requireBitExact(t, tinyAt(5), got)
	require.Equal(t, "abcz", saved.Vocab)
	// A record that does not decode stops the restore (nil check: decode only).
	_, err = Restore(dir, 5, tinyAt(0), nil, CheckMetadata(Schema{"other", 1}, &saved, nil))
	require.ErrorIs(t, err, ErrMismatch)
	require.ErrorContains(t, err, `file manifest.json: does not match: the metadata record is of kind "test-run", the program reads "other"`)
	// safetensors files have no record.
	_, _, err = ReadSafetensors(strings.NewReader(""), 0, tinyAt(0), CheckMetadata(runSchema, &saved, nil))
	require.ErrorContains(t, err, "CheckMetadata and SkipCorrupt apply to checkpoints")
}
