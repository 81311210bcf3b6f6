package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// narrator prints the story. The watchers print from their own goroutines, so every line goes
// through one lock.
type narrator struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	steps int
}

func newNarrator(w io.Writer) *narrator { return &narrator{w: w, start: time.Now()} }

// step starts a numbered chapter of the story.
func (n *narrator) step(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.steps++
	fmt.Fprintf(n.w, "\n%2d. %s\n", n.steps, fmt.Sprintf(format, args...))
}

// say prints one event, stamped with the time since the demo started.
func (n *narrator) say(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "    [%5.1fs] %s\n", time.Since(n.start).Seconds(), fmt.Sprintf(format, args...))
}

// detail prints lines that belong to the previous event, indented under it.
func (n *narrator) detail(lines ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range lines {
		fmt.Fprintf(n.w, "             %s\n", l)
	}
}

// block prints a command's output verbatim, indented, with a bar to set it apart.
func (n *narrator) block(text string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range strings.Split(text, "\n") {
		fmt.Fprintf(n.w, "             | %s\n", l)
	}
}

// plain prints text as is, for the summary and the KEEP=1 instructions.
func (n *narrator) plain(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, format+"\n", args...)
}
