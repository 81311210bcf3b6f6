package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// runPkgsync runs the pkgsync CLI, shows the command line and its output, and fails with that
// output when the command does.
func (d *demo) runPkgsync(ctx context.Context, args ...string) error {
	d.out.say("$ pkgsync %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, d.pkgsyncBin, args...)
	// Killed with the demo even if the demo itself is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+signingKeyPassword)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	d.out.block(out.String())
	if err != nil {
		return fmt.Errorf("pkgsync %s: %w", args[0], err)
	}
	return nil
}

// process is the controller, running as its own process the way it runs in a cluster.
type process struct {
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	done    chan struct{}
	err     error
	// stopping is closed by stop, so that an exit it caused is not reported as a crash.
	stopping chan struct{}
}

// startProcess starts bin with args, its output going to logPath. exited is called if the
// process ends before stop is called.
func startProcess(bin string, args []string, logPath string, exited func(error)) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log file: %w", err)
	}
	p := &process{cmd: exec.Command(bin, args...), logPath: logPath, log: log, done: make(chan struct{}), stopping: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	// Its own process group, so Ctrl-C reaches only the demo, which stops the controller first
	// and the control planes after; and SIGTERM if the demo dies without cleaning up.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := p.cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
		select {
		case <-p.stopping:
		default:
			exited(p.err)
		}
	}()
	return p, nil
}

// stop asks the process to shut down (SIGTERM) and kills it when it takes longer than grace.
func (p *process) stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	select {
	case <-p.stopping:
		return nil
	default:
		close(p.stopping)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop controller: %w", err)
	}
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.log.Close()
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
