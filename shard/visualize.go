package shard

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gonox/gonox/tensor"
)

// Visualize draws which device holds which block of x, as
// jax.debug.visualize_array_sharding does: a grid of boxes, one per block,
// each labelled with the devices that hold it ("CPU 0" for one, "CPU 0,1"
// for replicas, by device ID). A float32[8,8] split P("dp", "tp") over the
// 4x2 mesh prints as
//
//	┌──────────┬──────────┐
//	│  CPU 0   │  CPU 1   │
//	├──────────┼──────────┤
//	│  CPU 2   │  CPU 3   │
//	├──────────┼──────────┤
//	│  CPU 4   │  CPU 5   │
//	├──────────┼──────────┤
//	│  CPU 6   │  CPU 7   │
//	└──────────┴──────────┘
//
// Box sizes follow JAX's arithmetic, so the picture matches JAX's without
// colour: widths and heights are proportional to the blocks and to the
// tensor's aspect ratio, a box is at least 9 and at most 80 columns wide,
// and a 1-D tensor is drawn as one row of boxes one line high. Where JAX's
// console would squeeze a table wider than 80 columns, Visualize narrows
// the boxes to fit, but never below their labels.
//
// JAX draws only 1-D and 2-D arrays; Visualize also draws the others:
//
//   - a scalar as a single box;
//   - a tensor of rank 3 or more as the 2-D tensor whose rows are all its
//     leading dimensions flattened row-major and whose columns are its
//     last dimension. Each row of boxes is then one block of the leading
//     dimensions (their block indices in row-major order), which need not
//     be a contiguous range of the flattened rows.
//
// A host tensor (and a block inside Map) lives on no device of a mesh: it
// is drawn as a single box labelled "host".
func Visualize(x *tensor.Tensor) string {
	shape := x.Shape()
	r := len(shape)
	rows, cols := 1, 1
	// holders[row*cols+col] lists the IDs of the devices holding the block.
	var holders [][]int
	if sh, ok := ShardingOf(x); ok {
		geo := sh.geometry("shard.Visualize", shape)
		for i := 0; i < r-1; i++ {
			rows *= geo.parts[i]
		}
		if r > 0 {
			cols = geo.parts[r-1]
		}
		holders = make([][]int, rows*cols)
		for dev, d := range sh.mesh.devices {
			idx := sh.blockIndex(dev, r)
			row, col := 0, 0
			for i := 0; i < r-1; i++ {
				row = row*geo.parts[i] + idx[i]
			}
			if r > 0 {
				col = idx[r-1]
			}
			holders[row*cols+col] = append(holders[row*cols+col], d.ID())
		}
	}
	labels := make([]string, rows*cols)
	for i := range labels {
		if holders == nil {
			labels[i] = "host"
			continue
		}
		ids := slices.Clone(holders[i])
		slices.Sort(ids)
		s := make([]string, len(ids))
		for k, id := range ids {
			s[k] = strconv.Itoa(id)
		}
		labels[i] = "CPU " + strings.Join(s, ",")
	}

	// JAX's geometry (jax._src.debugging.visualize_sharding, scale 1).
	const (
		baseHeight    = 10
		heightToWidth = 2.5
		minWidth      = 9
		maxWidth      = 80
	)
	oneD := r <= 1
	height, width := 1, 1 // the tensor seen as 2-D
	switch {
	case r == 1:
		height = shape[0]
	case r >= 2:
		for _, d := range shape[:r-1] {
			height *= d
		}
		width = shape[r-1]
	}
	height, width = max(height, 1), max(width, 1)
	aspect := float64(width) / float64(height)
	if oneD {
		aspect = 1 / float64(height)
	}
	baseWidth := int(baseHeight * aspect)
	boxWidth := int(1 / float64(cols) * float64(baseWidth) * heightToWidth)
	boxWidth = min(max(boxWidth, minWidth), maxWidth)
	boxHeight := 1
	if !oneD {
		boxHeight = int(1 / float64(rows) * baseHeight)
	}
	top, rem := pyDivMod(boxHeight-2, 2)
	bottom := max(top+rem, 0)
	top = max(top, 0)

	// Each cell is its label with JAX's padding; a column is as wide as
	// its widest cell, and narrower cells are centred in it.
	type cell struct{ left, right int }
	cells := make([]cell, len(labels))
	colWidth := make([]int, cols)
	labelWidth := make([]int, cols)
	for i, l := range labels {
		n := len(l)
		left, rem := pyDivMod(boxWidth-n-2, 2)
		right := max(left+rem, 0)
		left = max(left, 0)
		cells[i] = cell{left, right}
		colWidth[i%cols] = max(colWidth[i%cols], left+n+right)
		labelWidth[i%cols] = max(labelWidth[i%cols], n)
	}
	if total := sumInts(colWidth) + cols + 1; total > maxWidth {
		avail := maxWidth - cols - 1
		s := sumInts(colWidth)
		for c := range colWidth {
			colWidth[c] = max(labelWidth[c], colWidth[c]*avail/s)
		}
		for i := range cells {
			cells[i] = cell{}
		}
	}

	var b strings.Builder
	rule := func(l, m, r string) {
		b.WriteString(l)
		for c, w := range colWidth {
			if c > 0 {
				b.WriteString(m)
			}
			b.WriteString(strings.Repeat("─", w))
		}
		b.WriteString(r)
		b.WriteByte('\n')
	}
	rule("┌", "┬", "┐")
	for row := range rows {
		if row > 0 {
			rule("├", "┼", "┤")
		}
		for line := range top + 1 + bottom {
			b.WriteString("│")
			for c := range cols {
				if c > 0 {
					b.WriteString("│")
				}
				w := colWidth[c]
				if line != top {
					b.WriteString(strings.Repeat(" ", w))
					continue
				}
				l, cl := labels[row*cols+c], cells[row*cols+c]
				inner := w - cl.left - cl.right
				a := max((inner-len(l))/2, 0)
				z := max(inner-len(l)-a, 0)
				b.WriteString(strings.Repeat(" ", cl.left+a))
				b.WriteString(l)
				b.WriteString(strings.Repeat(" ", z+cl.right))
			}
			b.WriteString("│\n")
		}
	}
	rule("└", "┴", "┘")
	return b.String()
}

// pyDivMod is Python's divmod: the quotient rounded down and a
// non-negative remainder for a positive divisor.
func pyDivMod(a, b int) (int, int) {
	q, m := a/b, a%b
	if m < 0 {
		q, m = q-1, m+b
	}
	return q, m
}

func sumInts(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}
