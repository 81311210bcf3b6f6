package render

import (
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
)

// Inputs says which parts of Options that differ from one installing resource to the next a
// render read: what two resources' renders of one package and configuration may differ by.
// A render that read neither gives the same objects for every resource that installs the
// package with that configuration on the cluster, so callers can share one render between them.
type Inputs struct {
	// Package is set when templates or CEL expressions read .package: the resource's name,
	// namespace, labels and annotations and the image reference.
	Package bool
	// HostedCluster is set when they read .environment.hyperShift (Options.Environment.HostedCluster).
	HostedCluster bool
}

// Union is every input either read.
func (in Inputs) Union(other Inputs) Inputs {
	return Inputs{Package: in.Package || other.Package, HostedCluster: in.HostedCluster || other.HostedCluster}
}

// Covers reports whether in holds every input other holds.
func (in Inputs) Covers(other Inputs) bool { return in.Union(other) == in }

// Only returns opts with the parts of Options that in does not hold cleared: what a render
// that reads in sees as well as opts.
func (in Inputs) Only(opts Options) Options {
	if !in.Package {
		opts.Name, opts.Namespace, opts.Labels, opts.Annotations, opts.Image = "", "", nil, nil, ""
	}
	if !in.HostedCluster {
		opts.Environment.HostedCluster, opts.Environment.HyperShift = nil, false
	}
	return opts
}

// readDepth is how deep read paths are told apart (environment.hyperShift from
// environment.kubernetes); a read of anything deeper counts as a read of its prefix.
const readDepth = 2

// reads records the paths of the template context a render may have read: "package.metadata",
// "environment.hyperShift", "" for the whole context. Templates are analysed before they run
// (every branch counts, whatever the configuration); CEL expressions report the variables they
// resolve while they run.
type reads map[string]bool

// inputs classifies the paths read.
func (r reads) inputs() Inputs {
	var in Inputs
	for p := range r {
		if p == "" || p == "package" || strings.HasPrefix(p, "package.") {
			in.Package = true
		}
		if p == "" || p == "environment" || p == "environment.hyperShift" || strings.HasPrefix(p, "environment.hyperShift.") {
			in.HostedCluster = true
		}
	}
	return in
}

// value is what an expression of a template may be derived from: the paths of the context it
// may hold (or be computed from). nil is a constant; {""} is the whole context.
type value map[string]bool

var root = value{"": true}

func (v value) union(o value) value {
	if len(o) == 0 {
		return v
	}
	out := value{}
	for p := range v {
		out[p] = true
	}
	for p := range o {
		out[p] = true
	}
	return out
}

// field is v.idents: the path of each value, extended up to readDepth.
func (v value) field(idents []string) value {
	if len(v) == 0 || len(idents) == 0 {
		return v
	}
	out := value{}
	for p := range v {
		parts := []string{}
		if p != "" {
			parts = strings.Split(p, ".")
		}
		for _, id := range idents {
			if len(parts) == readDepth {
				break
			}
			parts = append(parts, id)
		}
		out[strings.Join(parts, ".")] = true
	}
	return out
}

func (v value) key() string {
	ps := make([]string, 0, len(v))
	for p := range v {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return strings.Join(ps, "\x00")
}

// readAnalysis finds what the templates of one set may read of the context, conservatively:
// every value an expression evaluates counts as read (to readDepth), except the context
// itself passed whole to a named template (template, include), whose body is analysed with it
// instead. Functions only see their arguments, so their results count as derived from them.
type readAnalysis struct {
	set   *template.Template
	reads reads
	// done holds the named templates analysed, with the value of dot they got.
	done map[string]bool
}

// analyseReads adds to r what executing the template name of set with the whole context may read.
func analyseReads(set *template.Template, name string, r reads) {
	a := &readAnalysis{set: set, reads: r, done: map[string]bool{}}
	a.template(name, root)
}

func (a *readAnalysis) read(v value) value {
	for p := range v {
		a.reads[p] = true
	}
	return v
}

// frame is what one execution of a template knows: dot and the variables ($ included).
type frame struct {
	dot  value
	vars map[string]value
}

func (a *readAnalysis) template(name string, dot value) {
	key := name + "\x01" + dot.key()
	if a.done[key] {
		return
	}
	a.done[key] = true
	t := a.set.Lookup(name)
	if t == nil || t.Tree == nil || t.Root == nil {
		a.read(dot) // not known before it runs: it may read all it is given
		return
	}
	a.list(t.Root, &frame{dot: dot, vars: map[string]value{"$": dot}})
}

func (a *readAnalysis) list(l *parse.ListNode, s *frame) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		a.node(n, s)
	}
}

func (a *readAnalysis) node(n parse.Node, s *frame) {
	switch n := n.(type) {
	case *parse.ActionNode:
		a.pipe(n.Pipe, s)
	case *parse.IfNode:
		a.pipe(n.Pipe, s)
		a.list(n.List, s)
		a.list(n.ElseList, s)
	case *parse.WithNode:
		v := a.pipe(n.Pipe, s)
		a.list(n.List, &frame{dot: v, vars: s.vars})
		a.list(n.ElseList, s)
	case *parse.RangeNode:
		v := a.pipe(n.Pipe, s)
		a.list(n.List, &frame{dot: v, vars: s.vars})
		a.list(n.ElseList, s)
	case *parse.TemplateNode:
		var v value
		if n.Pipe != nil {
			v = a.pipeArg(n.Pipe, s)
		}
		a.template(n.Name, v)
	case *parse.ListNode:
		a.list(n, s)
	}
}

// pipe evaluates a pipeline: each command's value is the last argument of the next.
func (a *readAnalysis) pipe(p *parse.PipeNode, s *frame) value {
	if p == nil {
		return nil
	}
	var v value
	for i, cmd := range p.Cmds {
		v = a.command(cmd, s, v, i > 0)
	}
	for _, d := range p.Decl {
		// Variables are merged, not kept per frame: what a variable may hold anywhere, it may hold
		// everywhere.
		s.vars[d.Ident[0]] = s.vars[d.Ident[0]].union(v)
	}
	return v
}

// pipeArg is pipe for the value handed to a named template: the whole context is not read by
// being handed over.
func (a *readAnalysis) pipeArg(p *parse.PipeNode, s *frame) value {
	if len(p.Decl) == 0 && len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1 {
		if v, ok := a.handedOver(p.Cmds[0].Args[0], s); ok {
			return v
		}
	}
	return a.pipe(p, s)
}

// handedOver returns the value of a bare dot or variable without reading it.
func (a *readAnalysis) handedOver(n parse.Node, s *frame) (value, bool) {
	switch n := n.(type) {
	case *parse.DotNode:
		return s.dot, true
	case *parse.VariableNode:
		if len(n.Ident) == 1 {
			if v, ok := s.vars[n.Ident[0]]; ok {
				return v, true
			}
		}
	}
	return nil, false
}

func (a *readAnalysis) command(cmd *parse.CommandNode, s *frame, piped value, hasPiped bool) value {
	if len(cmd.Args) == 0 {
		return piped
	}
	if id, ok := cmd.Args[0].(*parse.IdentifierNode); ok {
		args := cmd.Args[1:]
		if id.Ident == "include" && len(args) >= 1 {
			if name, ok := args[0].(*parse.StringNode); ok {
				var dot value
				switch {
				case len(args) == 2 && !hasPiped:
					if v, ok := a.handedOver(args[1], s); ok {
						dot = v
					} else {
						dot = a.arg(args[1], s)
					}
				default:
					for _, arg := range args[1:] {
						dot = dot.union(a.arg(arg, s))
					}
					dot = dot.union(piped)
				}
				a.template(name.Text, dot)
				return dot
			}
		}
		v := piped
		for _, arg := range args {
			v = v.union(a.arg(arg, s))
		}
		return v
	}
	// A value, not a function: a pipeline's first command, or a method-less chain.
	v := piped
	for _, arg := range cmd.Args {
		v = v.union(a.arg(arg, s))
	}
	return v
}

// arg evaluates one argument and reads it.
func (a *readAnalysis) arg(n parse.Node, s *frame) value {
	switch n := n.(type) {
	case *parse.DotNode:
		return a.read(s.dot)
	case *parse.FieldNode:
		return a.read(s.dot.field(n.Ident))
	case *parse.VariableNode:
		base, ok := s.vars[n.Ident[0]]
		if !ok {
			base = root // declared where this analysis does not follow: assume anything
		}
		return a.read(base.field(n.Ident[1:]))
	case *parse.ChainNode:
		return a.read(a.arg(n.Node, s).field(n.Field))
	case *parse.PipeNode:
		return a.read(a.pipe(n, s))
	case *parse.IdentifierNode:
		return nil // a function called without arguments
	}
	return nil // constants
}
