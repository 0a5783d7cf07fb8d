package checkpoint

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Schema names the layout of a metadata record: what kind of record it
// is and which version of its fields. A program defines one per record
// type and uses it to save (WithMetadata, ManagerOptions) and to read
// (ReadMetadata, CheckMetadata):
//
//	var runSchema = checkpoint.Schema{Kind: "moe-run", Version: 2}
type Schema struct {
	// Kind says what the record describes, such as "moe-run": a record
	// of another kind is refused. Not empty, at most 128 bytes, no
	// control characters.
	Kind string
	// Version is the version of the record's fields, from 1. Raise it
	// when a field is removed, renamed or changes meaning: a program
	// refuses a record newer than the version it knows, and reads older
	// ones (see ReadMetadata).
	Version int
}

// String returns the kind, quoted, and the version: "moe-run" v2.
func (s Schema) String() string { return fmt.Sprintf("%q v%d", s.Kind, s.Version) }

func (s Schema) check() error {
	switch {
	case s.Kind == "":
		return errors.New("the schema has no Kind")
	case len(s.Kind) > maxKindBytes || !utf8.ValidString(s.Kind) || strings.IndexFunc(s.Kind, unicode.IsControl) >= 0:
		return fmt.Errorf("schema kind %q: want at most %d bytes of UTF-8 without control characters", s.Kind, maxKindBytes)
	case s.Version < 1:
		return fmt.Errorf("schema %v: versions count from 1", s)
	}
	return nil
}

const (
	maxKindBytes     = 128
	maxGonoxBytes    = 256
	maxMetadataBytes = 1 << 20 // a record is small: settings, not data
)

// metadataRecord is the "metadata" field of a manifest (format version 3).
type metadataRecord struct {
	Kind    string          `json:"kind"`
	Version int             `json:"version"`
	Gonox   string          `json:"gonox"`
	Value   json.RawMessage `json:"value"`
}

// newRecord encodes v as a record of schema s.
func newRecord(s Schema, v any) (*metadataRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("metadata %v: %w", s, err)
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("metadata %v: %T encodes as %.20s, want a JSON object (a struct or a map)", s, v, b)
	}
	if len(b) > maxMetadataBytes {
		return nil, fmt.Errorf("metadata %v: %d bytes of JSON, the limit is %d (a record holds settings; keep data in tensors)", s, len(b), maxMetadataBytes)
	}
	return &metadataRecord{Kind: s.Kind, Version: s.Version, Gonox: GonoxVersion(), Value: b}, nil
}

// validate checks a record read from a manifest: the fields' bounds and a
// value that is one JSON object with no key twice in any object.
func (r *metadataRecord) validate() error {
	if err := (Schema{Kind: r.Kind, Version: r.Version}).check(); err != nil {
		return fmt.Errorf("metadata: %v", err)
	}
	if len(r.Gonox) > maxGonoxBytes || !utf8.ValidString(r.Gonox) {
		return fmt.Errorf("metadata: gonox version of %d bytes", len(r.Gonox))
	}
	if len(r.Value) == 0 {
		return errors.New("metadata: no value")
	}
	if len(r.Value) > maxMetadataBytes {
		return fmt.Errorf("metadata: value of %d bytes, the limit is %d", len(r.Value), maxMetadataBytes)
	}
	if err := checkJSONObject(r.Value); err != nil {
		return fmt.Errorf("metadata: value: %v", err)
	}
	return nil
}

// checkJSONObject checks that b is one JSON object in which no object
// has a key twice (encoding/json would keep the last one silently).
func checkJSONObject(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		keys    map[string]bool // nil for an array
		wantKey bool
	}
	var stack []*frame
	for first := true; ; first = false {
		tok, err := dec.Token()
		if err == io.EOF && !first && len(stack) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
		if first && tok != json.Delim('{') {
			return errors.New("not a JSON object")
		}
		if !first && len(stack) == 0 {
			return errors.New("data after the object")
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.wantKey {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				continue
			}
			k, _ := tok.(string)
			if top.keys[k] {
				return fmt.Errorf("key %q appears twice in an object", k)
			}
			top.keys[k] = true
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value (scalar or container) in an object: a key comes next.
		// Containers set it now too; it is read once they are closed.
		if top != nil && top.keys != nil && tok != json.Delim(']') {
			top.wantKey = true
		}
	}
}

// WithMetadata saves v with the step as its metadata record of schema s:
// a small record of what the step holds that the tensors do not say —
// the model's configuration, the vocabulary or dataset identity, the
// optimizer and schedule settings — which ReadMetadata reads back without
// restoring a tensor and CheckMetadata checks before a restore. v is the
// program's own struct (or map), encoded with encoding/json when Save is
// called; it must encode as a JSON object of at most 1 MiB. The version
// of gonox that saved the step is recorded with it (GonoxVersion).
//
// The record is part of the step's manifest, so it is as atomic as the
// step: it exists exactly when the step does, also in a Manager's
// background saves and in a job of several processes (where every
// process must pass the same record; the save fails otherwise).
func WithMetadata(s Schema, v any) SaveOption {
	return func(c *saveConfig) { c.meta, c.metaValue, c.metaSet = s, v, true }
}

// MetadataInfo describes the metadata record of a saved step.
type MetadataInfo struct {
	Step   int       // the step
	Time   time.Time // when the step was saved (UTC), or zero if unknown
	Schema Schema    // the schema the record was saved with
	Gonox  string    // the version of gonox that saved it (GonoxVersion)
	// Value is the record as saved, JSON: to decode a record of an older
	// version into that version's type, say.
	Value json.RawMessage
}

// ReadMetadata reads the metadata record saved with step of dir (see
// WithMetadata) without reading any tensor, and decodes it into v, a
// non-nil pointer to the program's record (nil: check the schema only).
//
// The decoding is strict. It fails, with an *Error naming the step and
// its manifest.json and wrapping ErrMismatch, if the step has no record,
// if the record's kind is not s.Kind, if its version is newer than
// s.Version (a record written by a newer program, whose fields this one
// may misread), if it has a field v does not, or if a value does not fit
// its field. A record of an older version is decoded as it is, and
// MetadataInfo.Schema says which version it was: fields it lacks keep the
// values they have in v, so decode into the defaults that an older record
// implies, or into a zero value to see what was saved. A damaged step
// gives the errors Restore gives (ErrCorrupt, ErrNotFound, ...).
func ReadMetadata(dir string, step int, s Schema, v any) (MetadataInfo, error) {
	checkTarget("checkpoint.ReadMetadata", s, v)
	root, m, err := readManifest(dir, step)
	if err != nil {
		return MetadataInfo{}, relabel(err, "metadata")
	}
	root.Close()
	info, cause := decodeMetadata(m, s, v)
	if cause != nil {
		return info, &Error{Op: "metadata", Step: step, Dir: stepPath(dir, step), File: manifestName, Err: cause}
	}
	return info, nil
}

// checkTarget panics, as for any programmer error, if s is not a valid
// schema or v is neither nil nor a non-nil pointer.
func checkTarget(op string, s Schema, v any) {
	if err := s.check(); err != nil {
		panic(fmt.Sprintf("%s: %v", op, err))
	}
	if v == nil {
		return
	}
	if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || rv.IsNil() {
		panic(fmt.Sprintf("%s: decoding into %T, want a non-nil pointer", op, v))
	}
}

// relabel sets the Op of err, if it is an *Error.
func relabel(err error, op string) error {
	var e *Error
	if errors.As(err, &e) {
		e.Op = op
	}
	return err
}

// decodeMetadata checks the record of m against s and decodes it into v.
// The error is the cause, wrapping ErrMismatch.
func decodeMetadata(m *manifest, s Schema, v any) (MetadataInfo, error) {
	info := MetadataInfo{Step: m.Step}
	if t, err := time.Parse(time.RFC3339Nano, m.Time); err == nil {
		info.Time = t
	}
	r := m.Metadata
	if r == nil {
		return info, errf(ErrMismatch, "the step has no metadata record (it was saved without one), the program reads %v", s)
	}
	info.Schema, info.Gonox, info.Value = Schema{Kind: r.Kind, Version: r.Version}, r.Gonox, r.Value
	if r.Kind != s.Kind {
		return info, errf(ErrMismatch, "the metadata record is of kind %q, the program reads %q", r.Kind, s.Kind)
	}
	if r.Version > s.Version {
		return info, errf(ErrMismatch, "the metadata record is %v, newer than this program reads (up to version %d): it was saved by gonox %s with a newer record type", info.Schema, s.Version, r.Gonox)
	}
	if v == nil {
		return info, nil
	}
	dec := json.NewDecoder(bytes.NewReader(r.Value))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return info, nil
	}
	older := ""
	if r.Version < s.Version {
		older = fmt.Sprintf(" (the record is version %d, older than %d: decode it with that version's type)", r.Version, s.Version)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(record)"
		}
		return info, errf(ErrMismatch, "metadata %v: field %s: the record has a JSON %s, %s needs %v%s", info.Schema, field, te.Value, typeName(v), te.Type, older)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return info, errf(ErrMismatch, "metadata %v: the record has a field %s that %s lacks%s", info.Schema, name, typeName(v), older)
	}
	return info, errf(ErrMismatch, "metadata %v: decoding into %s: %v%s", info.Schema, typeName(v), err, older)
}

// typeName names the type v points to.
func typeName(v any) string { return reflect.TypeOf(v).Elem().String() }

// CheckMetadata makes Restore and RestoreLatest check the step's metadata
// record before they read any tensor: the record is decoded into saved
// (a non-nil pointer) as ReadMetadata does, and check, if not nil, is
// called with its description, saved then holding the record. check
// compares saved with the program's current settings (DiffMetadata) and
// returns an error to refuse the step, nil to go on. A record that does
// not decode, or check's error, stops the restore (RestoreLatest with
// SkipCorrupt does not fall back past it: an older step would not fit
// better); check's error is returned wrapped in an *Error naming the
// step, so errors.Is and errors.As see through to it.
//
// Checking first matters when a setting changes parameter shapes: the
// program can name the setting (-dim: saved 64, now 128) where the
// restore would report a tensor whose shape differs.
func CheckMetadata(s Schema, saved any, check func(MetadataInfo) error) RestoreOption {
	checkTarget("checkpoint.CheckMetadata", s, saved)
	if saved == nil {
		panic("checkpoint.CheckMetadata: saved is nil, want a pointer to decode the record into")
	}
	return func(c *restoreConfig) { c.meta = &metaCheck{schema: s, saved: saved, check: check} }
}

type metaCheck struct {
	schema Schema
	saved  any
	check  func(MetadataInfo) error
}

// refusal is check's error, marked so that SkipCorrupt never skips it.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// run decodes the record of m into the saved value and calls check.
func (c *metaCheck) run(dir string, m *manifest) error {
	stepDir := stepPath(dir, m.Step)
	info, err := decodeMetadata(m, c.schema, c.saved)
	if err != nil {
		return &Error{Op: "restore", Step: m.Step, Dir: stepDir, File: manifestName, Err: err}
	}
	if c.check == nil {
		return nil
	}
	if err := c.check(info); err != nil {
		return &Error{Op: "restore", Step: m.Step, Dir: stepDir, Err: &refusal{err}}
	}
	return nil
}

// Difference is a setting whose saved value differs from the current one
// (see DiffMetadata).
type Difference struct {
	// Setting is the field's path in the record, in Go selector syntax:
	// "Heads", "Model.Dim", "Optim.LR" (fields of embedded structs by
	// their own names, as Go promotes them).
	Setting string
	Saved   any // the value in the saved record
	Current any // the value now
}

// String returns "Model.Heads: saved 4, now 8", values as JSON.
func (d Difference) String() string {
	return fmt.Sprintf("%s: saved %s, now %s", d.Setting, showValue(d.Saved), showValue(d.Current))
}

func showValue(v any) string {
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}

// DiffMetadata compares a saved record with the current one, setting by
// setting, and returns every setting that differs, in field order. It
// walks structs (and pointers to them) field by field: a setting is a
// field that is not itself a plain struct, and fields encoding/json
// leaves out (unexported, tagged "-") are not compared. Slices, arrays,
// maps and values with their own JSON or text encoding (time.Time) are
// one setting each, compared whole. Values are equal when they encode to
// the same JSON, which is what the record keeps.
//
// The program decides what each difference means: refuse the step for a
// model setting (Heads: saved 4, now 8), warn and go on for one that may
// change on resume (Steps, the mesh).
func DiffMetadata[T any](saved, current T) []Difference {
	var out []Difference
	diffValue(&out, "", reflect.ValueOf(&saved).Elem(), reflect.ValueOf(&current).Elem())
	return out
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func encodesItself(t reflect.Type) bool {
	return t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler)
}

func diffValue(out *[]Difference, name string, a, b reflect.Value) {
	t := a.Type()
	if !encodesItself(t) {
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if !f.IsExported() || f.Tag.Get("json") == "-" {
					continue
				}
				sub := f.Name
				if name != "" {
					sub = name + "." + f.Name
				}
				if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct && !encodesItself(f.Type) {
					sub = name // promoted fields, as Go and encoding/json see them
				}
				diffValue(out, sub, a.Field(i), b.Field(i))
			}
			return
		case reflect.Pointer:
			if !a.IsNil() && !b.IsNil() {
				diffValue(out, name, a.Elem(), b.Elem())
				return
			}
		case reflect.Interface:
			if !a.IsNil() && !b.IsNil() && a.Elem().Type() == b.Elem().Type() {
				diffValue(out, name, a.Elem(), b.Elem())
				return
			}
		}
	}
	if name == "" {
		name = "(record)"
	}
	av, bv := a.Interface(), b.Interface()
	ja, erra := json.Marshal(av)
	jb, errb := json.Marshal(bv)
	same := erra == nil && errb == nil && bytes.Equal(ja, jb)
	if erra != nil || errb != nil {
		same = reflect.DeepEqual(av, bv)
	}
	if !same {
		*out = append(*out, Difference{Setting: name, Saved: av, Current: bv})
	}
}

// GonoxVersion returns the version of gonox this program is built with,
// as WithMetadata records it: the module version ("v0.4.0"; "(devel)"
// when gonox is the main module), followed by the VCS revision when the
// build recorded one ("(devel) 7fe052c1e0a2+dirty"), or "unknown".
func GonoxVersion() string { return gonoxVersion() }

var gonoxVersion = sync.OnceValue(func() string {
	const mod = "github.com/gonox/gonox"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if bi.Main.Path == mod {
		v := bi.Main.Version
		if v == "" {
			v = "(devel)"
		}
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if rev != "" {
			v += " " + rev[:min(12, len(rev))] + dirty
		}
		return v
	}
	for _, d := range bi.Deps {
		if d.Path != mod {
			continue
		}
		if d.Replace != nil {
			if d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version + " (replaced by " + d.Replace.Path + ")"
		}
		return d.Version
	}
	return "unknown"
})

// stepPath is the directory of step in dir.
func stepPath(dir string, step int) string { return filepath.Join(dir, stepName(step)) }
