package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the module's root directory, from this package's.
const root = "../.."

// publicPackages returns the directories (relative to root) of the
// module's public library packages: not internal, not examples, not
// commands.
func publicPackages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		name := d.Name()
		if rel != "." && (strings.HasPrefix(name, ".") || name == "internal" || name == "testdata" || name == "examples" || name == "bench" || name == "docs") {
			return filepath.SkipDir
		}
		if m, _ := filepath.Glob(filepath.Join(path, "doc.go")); len(m) == 1 {
			dirs = append(dirs, rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, dirs, "tensor")
	return dirs
}

// parsePackage parses the non-test files of the package in dir.
func parsePackage(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, dir))
	require.NoError(t, err)
	var files []*ast.File
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, dir, n), nil, parser.ParseComments)
		require.NoError(t, err)
		files = append(files, f)
	}
	return files
}

// receiverName returns the name of a method's receiver type.
func receiverName(d *ast.FuncDecl) string {
	t := d.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// CONTRIBUTING: "every exported name has a doc comment". A constant or
// variable in a group is covered by the group's comment or by the comment
// on a run of constants before it.
func TestExportedNamesHaveDocComments(t *testing.T) {
	for _, dir := range publicPackages(t) {
		fset := token.NewFileSet()
		for _, f := range parsePackage(t, fset, dir) {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() || d.Doc != nil {
						continue
					}
					name := d.Name.Name
					if d.Recv != nil {
						r := receiverName(d)
						if !ast.IsExported(r) {
							continue
						}
						name = r + "." + name
					}
					assert.Fail(t, "no doc comment", "%s: func %s", fset.Position(d.Pos()), name)
				case *ast.GenDecl:
					covered := d.Doc != nil // a comment on a run of a group's constants covers the run
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
								assert.Fail(t, "no doc comment", "%s: type %s", fset.Position(s.Pos()), s.Name.Name)
							}
						case *ast.ValueSpec:
							covered = covered || s.Doc != nil || s.Comment != nil
							for _, n := range s.Names {
								if n.IsExported() && !covered {
									assert.Fail(t, "no doc comment", "%s: %s", fset.Position(n.Pos()), n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
}

// names returns, for each public package (by its last path element), its
// exported top-level names, and for each of its types the names of their
// methods and fields.
func names(t *testing.T) (top map[string]map[string]bool, members map[string]map[string]bool) {
	t.Helper()
	top, members = map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, dir := range publicPackages(t) {
		pkg := filepath.Base(dir)
		top[pkg] = map[string]bool{}
		fset := token.NewFileSet()
		for _, f := range parsePackage(t, fset, dir) {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						top[pkg][d.Name.Name] = true
					} else {
						k := pkg + "." + receiverName(d)
						if members[k] == nil {
							members[k] = map[string]bool{}
						}
						members[k][d.Name.Name] = true
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							top[pkg][s.Name.Name] = true
							k := pkg + "." + s.Name.Name
							if members[k] == nil {
								members[k] = map[string]bool{}
							}
							switch ty := s.Type.(type) {
							case *ast.StructType:
								for _, fl := range ty.Fields.List {
									for _, n := range fl.Names {
										members[k][n.Name] = true
									}
								}
							case *ast.InterfaceType:
								for _, m := range ty.Methods.List {
									for _, n := range m.Names {
										members[k][n.Name] = true
									}
								}
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								top[pkg][n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return top, members
}

// docFiles returns the prose checked by TestDocsNameExistingIdentifiers.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md"}
	md, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, f := range md {
		if filepath.Base(f) != "performance.md" {
			rel, _ := filepath.Rel(root, f)
			files = append(files, rel)
		}
	}
	for _, dir := range publicPackages(t) {
		files = append(files, filepath.Join(dir, "doc.go"))
	}
	return files
}

// Names the prose mentions on purpose although they do not exist.
var notNames = map[string]bool{
	"tensor.Softsign":   true, // tensor's "How to write an op" adds it as its worked example
	"pytree.Predicates": true, // the plural of pytree.Predicate
}

// CONTRIBUTING: "Every command in a doc runs as written." A pkg.Name or
// pkg.Type.Member in the README, the guides or a package's guide names
// something that exists.
func TestDocsNameExistingIdentifiers(t *testing.T) {
	top, members := names(t)
	var pkgs []string
	for p := range top {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	ref := regexp.MustCompile(`\b(` + strings.Join(pkgs, "|") + `)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, file))
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			for _, ix := range ref.FindAllStringSubmatchIndex(line, -1) {
				if strings.HasSuffix(line[:ix[0]], "torch.") {
					continue // PyTorch's torch.nn.Conv2d, not gonox's nn
				}
				m := func(k int) string {
					if ix[2*k] < 0 {
						return ""
					}
					return line[ix[2*k]:ix[2*k+1]]
				}
				pkg, name, member := m(1), m(2), m(3)
				if notNames[pkg+"."+name] {
					continue
				}
				if !top[pkg][name] {
					assert.Fail(t, "names nothing", "%s:%d: %s.%s does not exist", file, i+1, pkg, name)
					continue
				}
				if ms, isType := members[pkg+"."+name]; isType && member != "" && !ms[member] && !top[pkg][member] {
					assert.Fail(t, "names nothing", "%s:%d: %s.%s.%s does not exist", file, i+1, pkg, name, member)
				}
			}
		}
	}
}
