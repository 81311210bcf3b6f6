package render

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
)

// Template limits. Package templates are written by people the controller does not trust, and
// text/template has no context and no bound on loops or allocations: without these a template
// could spin past the reconcile deadline (forever when there is none) or allocate until the
// process dies. Real templates stay far below every one of them.
const (
	// maxTemplateOutputBytes bounds what one template file renders to, what one include returns
	// and any one string a function returns or a template prints.
	maxTemplateOutputBytes = 8 << 20
	// maxTemplateTotalBytes bounds what the templates of one render allocate together, counted
	// as what they write plus what functions return (strings by length, lists and dicts by
	// entries, decoded documents by size). Renders run --concurrency at a time per kind inside
	// one controller Deployment (512 MiB), so this stays far below a share of that.
	maxTemplateTotalBytes = 32 << 20
	// maxTemplateItems bounds the entries of a list or dict a function returns.
	maxTemplateItems = 10_000
	// maxTemplateSteps bounds range iterations plus template and include calls in one render.
	maxTemplateSteps = 1_000_000
)

// templateLimits are the bounds one render's templates run under; tests lower them.
type templateLimits struct {
	outputBytes int64
	totalBytes  int64
	items       int64
	steps       int64
}

var defaultTemplateLimits = templateLimits{
	outputBytes: maxTemplateOutputBytes,
	totalBytes:  maxTemplateTotalBytes,
	items:       maxTemplateItems,
	steps:       maxTemplateSteps,
}

const (
	// tickFunc is called first in every template and range body: it stops the execution when
	// the context is done or the steps are used up. It prints nothing.
	tickFunc = "pkgsyncTick"
	// printableFunc ends the pipeline of every action that prints, to refuse a value that fmt
	// would take too long or too much memory to format (or never finish: a dict that contains
	// itself).
	printableFunc = "pkgsyncPrintable"
	// itemBytes is what one entry of a list or dict is counted as against the total.
	itemBytes = 16
	// scalarBytes is what a number is counted as when formatted: its digits, or an error marker
	// such as %!d(float64=-1.7976931348623157e+308).
	scalarBytes = 48
	// maxValueDepth is the nesting beyond which a value is refused: only a value that contains
	// itself, or a hostile one, gets there.
	maxValueDepth = 1000
)

// stopError ends a template execution that went over a limit or past its context.
type stopError struct {
	reason string
	err    error // the context's error, when that is what stopped it
}

func (e *stopError) Error() string { return "stopped: " + e.reason }
func (e *stopError) Unwrap() error { return e.err }

// budget is what the templates of one render may spend; every file's execution draws on it.
// It holds the context of the render under way because text/template has no way to pass one.
type budget struct {
	ctx    context.Context
	limits templateLimits
	steps  int64
	bytes  int64
}

// tick counts one step and stops the execution when the context is done or the steps are used
// up. It returns "" because the action calling it prints its result.
func (b *budget) tick() (string, error) {
	if err := b.ctx.Err(); err != nil {
		return "", &stopError{reason: err.Error(), err: err}
	}
	b.steps++
	if b.steps > b.limits.steps {
		return "", &stopError{reason: fmt.Sprintf("over %d steps (range iterations and template calls)", b.limits.steps)}
	}
	return "", nil
}

// spend counts n bytes against the render's total.
func (b *budget) spend(n int64) error {
	b.bytes += n
	if b.bytes > b.limits.totalBytes {
		return &stopError{reason: fmt.Sprintf("templates produced over %s in total", formatBytes(b.limits.totalBytes))}
	}
	return nil
}

// printable passes v through unchanged when fmt can print it within the output limit.
func (b *budget) printable(v any) (any, error) {
	if sizeOf(reflect.ValueOf(v), b.limits.outputBytes) > b.limits.outputBytes {
		return nil, &stopError{reason: fmt.Sprintf("printing a value over the %s limit, or one that contains itself", formatBytes(b.limits.outputBytes))}
	}
	return v, nil
}

// writer returns an output buffer bounded by the output limit.
func (b *budget) writer() *limitedWriter {
	return &limitedWriter{limit: b.limits.outputBytes, budget: b}
}

// limitedWriter collects a template's output and fails once it would go over its limit, which
// makes text/template stop the execution.
type limitedWriter struct {
	buf    strings.Builder
	limit  int64
	budget *budget
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if int64(w.buf.Len())+int64(len(p)) > w.limit {
		return 0, &stopError{reason: fmt.Sprintf("output over %s limit", formatBytes(w.limit))}
	}
	if err := w.budget.spend(int64(len(p))); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

func (w *limitedWriter) String() string { return w.buf.String() }

// instrument makes every template of set count its steps and check what it prints. text/template
// loops only in range and in template calls, so a call of tickFunc goes first in each range body
// and each template; each action that prints gets printableFunc as its last command.
func instrument(set *template.Template) {
	seen := map[*parse.ListNode]bool{}
	for _, t := range set.Templates() {
		if t.Tree == nil || t.Root == nil || seen[t.Root] {
			continue
		}
		instrumentList(t.Root, seen)
		prependTick(t.Root, t.Root.Pos)
	}
}

func instrumentList(list *parse.ListNode, seen map[*parse.ListNode]bool) {
	if list == nil || seen[list] {
		return
	}
	seen[list] = true
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.ActionNode:
			if len(n.Pipe.Decl) == 0 {
				n.Pipe.Cmds = append(n.Pipe.Cmds, funcCommand(printableFunc, n.Pos))
			}
		case *parse.RangeNode:
			instrumentList(n.List, seen)
			prependTick(n.List, n.Pos)
			instrumentList(n.ElseList, seen)
		case *parse.IfNode:
			instrumentList(n.List, seen)
			instrumentList(n.ElseList, seen)
		case *parse.WithNode:
			instrumentList(n.List, seen)
			instrumentList(n.ElseList, seen)
		}
	}
}

// prependTick puts a call of tickFunc first in list. pos is where errors point: the range, or
// the start of the template. The nodes are built rather than parsed so that they belong to no
// tree, and text/template locates them in the tree being executed.
func prependTick(list *parse.ListNode, pos parse.Pos) {
	tick := &parse.ActionNode{
		NodeType: parse.NodeAction,
		Pos:      pos,
		Pipe: &parse.PipeNode{
			NodeType: parse.NodePipe,
			Pos:      pos,
			Cmds:     []*parse.CommandNode{funcCommand(tickFunc, pos)},
		},
	}
	list.Nodes = append([]parse.Node{tick}, list.Nodes...)
}

func funcCommand(name string, pos parse.Pos) *parse.CommandNode {
	return &parse.CommandNode{
		NodeType: parse.NodeCommand,
		Pos:      pos,
		Args:     []parse.Node{parse.NewIdentifier(name).SetPos(pos)},
	}
}

var errorType = reflect.TypeFor[error]()

// bound wraps the template function fn so that it fails instead of allocating past the limits:
// its arguments are checked before the call and its result after. The wrapper returns an error
// besides the result, as text/template allows, even when fn does not.
func (b *budget) bound(name string, fn any) any {
	v := reflect.ValueOf(fn)
	ft := v.Type()
	in := make([]reflect.Type, ft.NumIn())
	for i := range in {
		in[i] = ft.In(i)
	}
	wt := reflect.FuncOf(in, []reflect.Type{ft.Out(0), errorType}, ft.IsVariadic())
	zero, noErr := reflect.Zero(ft.Out(0)), reflect.Zero(errorType)
	fail := func(err error) []reflect.Value {
		return []reflect.Value{zero, reflect.ValueOf(&err).Elem()}
	}
	check, measureArgs, deep := argChecks[name], !shallowFuncs.Has(name), deepResultFuncs.Has(name)
	return reflect.MakeFunc(wt, func(args []reflect.Value) []reflect.Value {
		if measureArgs || check != nil {
			flat := flatArgs(args, ft.IsVariadic())
			if measureArgs {
				if err := b.checkArgs(flat); err != nil {
					return fail(err)
				}
			}
			if check != nil {
				if err := check(b.limits, flat); err != nil {
					return fail(err)
				}
			}
		}
		var out []reflect.Value
		if ft.IsVariadic() {
			out = v.CallSlice(args)
		} else {
			out = v.Call(args)
		}
		if len(out) == 2 && !out[1].IsNil() {
			return []reflect.Value{zero, out[1]}
		}
		if err := b.checkResult(out[0], deep); err != nil {
			return fail(err)
		}
		return []reflect.Value{out[0], noErr}
	}).Interface()
}

// flatArgs spreads the variadic slice, the last of args, into single arguments.
func flatArgs(args []reflect.Value, variadic bool) []reflect.Value {
	if !variadic || len(args) == 0 {
		return args
	}
	last := args[len(args)-1]
	flat := append([]reflect.Value(nil), args[:len(args)-1]...)
	for i := range last.Len() {
		flat = append(flat, last.Index(i))
	}
	return flat
}

// checkArgs refuses a list or dict argument that fmt could not print within the output limit.
func (b *budget) checkArgs(args []reflect.Value) error {
	for i, a := range args {
		for a.Kind() == reflect.Interface && !a.IsNil() {
			a = a.Elem()
		}
		switch a.Kind() {
		case reflect.Map, reflect.Slice, reflect.Array, reflect.Struct, reflect.Pointer:
			if sizeOf(a, b.limits.outputBytes) > b.limits.outputBytes {
				return fmt.Errorf("refused: argument %d is over the %s limit, or contains itself", i+1, formatBytes(b.limits.outputBytes))
			}
		}
	}
	return nil
}

// checkResult refuses a string over the output limit or a list or dict over the item limit,
// and counts the result against the total.
func (b *budget) checkResult(v reflect.Value, deep bool) error {
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	if deep {
		return b.spend(sizeOf(v, b.limits.totalBytes))
	}
	switch v.Kind() {
	case reflect.String:
		n := int64(v.Len())
		if n > b.limits.outputBytes {
			return fmt.Errorf("result of %d bytes is over the %s limit", n, formatBytes(b.limits.outputBytes))
		}
		return b.spend(n)
	case reflect.Slice, reflect.Array, reflect.Map:
		n := int64(v.Len())
		if n > b.limits.items {
			return fmt.Errorf("result of %d items is over the %d item limit", n, b.limits.items)
		}
		return b.spend(n * itemBytes)
	}
	return nil
}

// valueSize is what formatting a value may cost: bytes, and how many values it holds, each of
// which fmt pads to a verb's width.
type valueSize struct {
	bytes  int64
	values int64
}

// sizeOf estimates the bytes fmt or an encoder writes for v.
func sizeOf(v reflect.Value, limit int64) int64 { return measure(v, limit).bytes }

// measure estimates the bytes fmt or an encoder writes for v: its strings, the digits of its
// numbers, plus some for each value for separators, quotes, indentation and fmt's error markers.
// It stops counting once over limit, so a value that contains itself comes out over any limit
// instead of never ending.
func measure(v reflect.Value, limit int64) valueSize {
	var s valueSize
	var walk func(v reflect.Value, depth int64)
	walk = func(v reflect.Value, depth int64) {
		if s.bytes > limit {
			return
		}
		if depth > maxValueDepth {
			s.bytes = limit + 1
			return
		}
		s.values++
		s.bytes += itemBytes + depth
		switch v.Kind() {
		case reflect.Invalid:
		case reflect.String:
			s.bytes += int64(v.Len())
		case reflect.Interface, reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), depth+1)
			}
		case reflect.Slice, reflect.Array:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				s.bytes += 4 * int64(v.Len()) // [255 0 12]
				s.values += int64(v.Len())
				return
			}
			for i := 0; i < v.Len() && s.bytes <= limit; i++ {
				walk(v.Index(i), depth+1)
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next() && s.bytes <= limit; {
				walk(it.Key(), depth+1)
				walk(it.Value(), depth+1)
			}
		case reflect.Struct:
			for i := 0; i < v.NumField() && s.bytes <= limit; i++ {
				walk(v.Field(i), depth+1)
			}
		default:
			s.bytes += scalarBytes
		}
	}
	walk(v, 0)
	return s
}
