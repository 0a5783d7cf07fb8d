package tensor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
	"testing"
)

// opVars returns the names of the package-level *Op variables declared in
// the package's non-test files: those declared with type *Op, or set to
// &Op{...} or to the result of a function returning *Op.
func opVars(t testing.TB) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, n, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	isOpPtr := func(e ast.Expr) bool {
		s, ok := e.(*ast.StarExpr)
		if !ok {
			return false
		}
		id, ok := s.X.(*ast.Ident)
		return ok && id.Name == "Op"
	}
	ctors := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if ok && fd.Recv == nil && fd.Type.Results != nil && len(fd.Type.Results.List) == 1 && isOpPtr(fd.Type.Results.List[0].Type) {
				ctors[fd.Name.Name] = true
			}
		}
	}
	makesOp := func(e ast.Expr) bool {
		switch v := e.(type) {
		case *ast.UnaryExpr:
			cl, ok := v.X.(*ast.CompositeLit)
			if !ok {
				return false
			}
			id, ok := cl.Type.(*ast.Ident)
			return ok && id.Name == "Op"
		case *ast.CallExpr:
			id, ok := v.Fun.(*ast.Ident)
			return ok && ctors[id.Name]
		}
		return false
	}
	seen := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name == "_" {
						continue
					}
					if (vs.Type != nil && isOpPtr(vs.Type)) || (i < len(vs.Values) && makesOp(vs.Values[i])) {
						seen[n.Name] = true
					}
				}
			}
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
