// Package desired holds the desired state that render produces and apply makes true: phases of
// objects in the order they are applied. It is the one type the two stages share, and it imports neither.
package desired
