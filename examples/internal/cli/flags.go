package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Flags is a flag set whose numeric flags declare their ranges where they
// are defined; Parse checks every one of them, then the checks of
// combinations added with Check, so that a command validates its whole
// command line before any work.
type Flags struct {
	fs     *flag.FlagSet
	out    io.Writer
	checks []func() error
	set    map[string]bool
}

// NewFlags returns an empty flag set for the named command, printing its
// usage to errOut for -h.
func NewFlags(name string, errOut io.Writer) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package prints a mistake and the whole usage; the
	// examples print one line (the error Parse returns), and the usage
	// only for -h.
	fs.SetOutput(io.Discard)
	return &Flags{fs: fs, out: errOut}
}

// String defines a string flag.
func (f *Flags) String(p *string, name, value, usage string) { f.fs.StringVar(p, name, value, usage) }

// Bool defines a boolean flag.
func (f *Flags) Bool(p *bool, name string, value bool, usage string) {
	f.fs.BoolVar(p, name, value, usage)
}

// Uint64 defines an unsigned integer flag (every value is valid: a seed).
func (f *Flags) Uint64(p *uint64, name string, value uint64, usage string) {
	f.fs.Uint64Var(p, name, value, usage)
}

// Int defines an integer flag whose value must lie in [lo, hi].
func (f *Flags) Int(p *int, name string, value, lo, hi int, usage string) {
	f.fs.IntVar(p, name, value, fmt.Sprintf("%s (%d to %d)", usage, lo, hi))
	f.checks = append(f.checks, func() error {
		if *p < lo || *p > hi {
			return Usagef("-%s %d: want an integer from %d to %d", name, *p, lo, hi)
		}
		return nil
	})
}

// Range is an interval of finite numbers, closed at both ends unless
// MinOpen (then Min itself is outside).
type Range struct {
	Min, Max float64
	MinOpen  bool
}

// Positive is the range (0, max].
func Positive(max float64) Range { return Range{Min: 0, Max: max, MinOpen: true} }

// Contains reports whether v is a finite number in the range.
func (r Range) Contains(v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) || v > r.Max {
		return false
	}
	if r.MinOpen {
		return v > r.Min
	}
	return v >= r.Min
}

// String returns "(0, 1]" or "[0, 100]".
func (r Range) String() string {
	open := "["
	if r.MinOpen {
		open = "("
	}
	return fmt.Sprintf("%s%s, %s]", open, fmtFloat(r.Min), fmtFloat(r.Max))
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Float defines a floating-point flag whose value must be a finite number
// in r: NaN and ±Inf are refused whatever the range.
func (f *Flags) Float(p *float64, name string, value float64, r Range, usage string) {
	f.fs.Float64Var(p, name, value, fmt.Sprintf("%s, in %v", usage, r))
	f.checks = append(f.checks, func() error {
		if !r.Contains(*p) {
			return Usagef("-%s %s: want a finite number in %v", name, fmtFloat(*p), r)
		}
		return nil
	})
}

// Check adds a check of the parsed flags (a combination of them, say),
// run by Parse after the ranges, in the order added. Its error is a
// usage error.
func (f *Flags) Check(check func() error) { f.checks = append(f.checks, check) }

// Parse parses args and runs the checks. It returns flag.ErrHelp for -h
// (the usage is printed), and a UsageError for a flag that does not parse,
// a positional argument, or a failed check.
func (f *Flags) Parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if f.out != nil {
				f.fs.SetOutput(f.out)
				fmt.Fprintf(f.out, "Usage of %s:\n", f.fs.Name())
				f.fs.PrintDefaults()
			}
			return err
		}
		return Usage(err)
	}
	if f.fs.NArg() > 0 {
		return Usagef("unexpected arguments %q", f.fs.Args())
	}
	f.set = map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	for _, c := range f.checks {
		if err := c(); err != nil {
			return Usage(err)
		}
	}
	return nil
}

// Changed reports whether the flag was given on the command line (after
// Parse).
func (f *Flags) Changed(name string) bool { return f.set[name] }
