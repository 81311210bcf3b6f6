package regexcost

import "regexp/syntax"

// programSize estimates, from the parsed pattern, how many instructions regexp compiles it to,
// erring high: the work of one step of the matcher is proportional to it. Computing it from
// the syntax tree prices a pattern before paying for its compilation, which for a short
// pattern with nested counted repetitions can be millions of instructions.
func programSize(re *syntax.Regexp) int64 {
	const frame = 3 // the program's first and last instructions, and a spare
	return min(frame+nodeSize(re), MaxProgram*MaxProgram)
}

func nodeSize(re *syntax.Regexp) int64 {
	const ceiling = 1 << 40 // saturate rather than overflow
	var sub int64
	for _, s := range re.Sub {
		sub = min(sub+nodeSize(s), ceiling)
	}
	switch re.Op {
	case syntax.OpLiteral:
		return int64(len(re.Rune)) + 1
	case syntax.OpConcat:
		return sub + 1
	case syntax.OpAlternate:
		return sub + int64(len(re.Sub)) + 1
	case syntax.OpCapture:
		return sub + 2
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return sub + 2
	case syntax.OpRepeat:
		n := int64(re.Max)
		if n < 0 {
			n = int64(re.Min) + 1
		}
		return min((sub+2)*max(n, 1), ceiling)
	case syntax.OpCharClass:
		// A class keeps its ranges in its instruction: \pL is some 650 of them, 5 KB.
		return 2 + int64(len(re.Rune))/2
	default: // any character, empty-width assertions, empty match
		return 2
	}
}

// looksBehind reports whether the pattern has an assertion that reads the character before the
// current position: beginning of text or line, word boundary or not.
func looksBehind(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpBeginText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	for _, s := range re.Sub {
		if looksBehind(s) {
			return true
		}
	}
	return false
}
