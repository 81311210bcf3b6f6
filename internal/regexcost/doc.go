// Package regexcost runs regular expressions that someone else wrote, or on input someone else
// wrote, only after bounding the work they can do.
//
// Go's regexp guarantees time linear in the program's size times the input's length, but a call
// cannot be interrupted: neither a context deadline nor CEL's cost limit (which cel-go counts
// after a function returns) stops one that is already running. Every call here is therefore
// priced before it runs, and refused when its price is over the limit. The library functions of
// CEL and of the template language that take a pattern (CEL's matches; sprig's regexMatch,
// regexFind, regexFindAll, regexReplaceAll, regexSplit and their variants) are built on it.
package regexcost
