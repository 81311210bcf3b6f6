package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is a component of a test environment run as a child process: its output goes to a
// log file, it runs in its own process group and is killed with the test process, so that a
// test that crashes or is killed leaks nothing.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// startProcess starts bin with args, writing its output to logPath.
func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	p := &process{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{}), log: log}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill ends the process at once (SIGKILL) and waits for it: for components with nothing to
// shut down cleanly, such as a registry whose storage the test throws away.
func (p *process) kill() error {
	if p == nil || p.cmd == nil {
		return nil
	}
	defer func() { p.cmd = nil }()
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	<-p.done
	return p.log.Close()
}

// processStopGrace is how long a component has to exit after SIGTERM before it is killed.
const processStopGrace = 5 * time.Second

// stop asks the process to exit (SIGTERM), kills it after processStopGrace, and waits for it.
func (p *process) stop() error {
	if p == nil || p.cmd == nil {
		return nil
	}
	defer func() { p.cmd = nil }()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(processStopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.log.Close()
}
