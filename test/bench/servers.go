package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// serverCPU is the CPU seconds the benchmark's other processes have used, by role: the
// management kube-apiserver, the hosted ones, etcd (all of them) and the registry. On two cores
// they share with the controller, they tell where a wave's time goes.
func serverCPU(mgmtHost string) map[string]float64 {
	mgmtPort := ""
	if u, err := url.Parse(mgmtHost); err == nil {
		mgmtPort = u.Port()
	}
	self := strconv.Itoa(os.Getpid())
	out := map[string]float64{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid := filepath.Base(dir)
		stat, err := os.ReadFile(dir + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm, fields := s[open+1:end], strings.Fields(s[end+1:])
		if len(fields) < 2 || fields[1] != self {
			continue // not a child of the benchmark
		}
		role := ""
		switch {
		case strings.HasPrefix(comm, "kube-apiserver"):
			role = "apiserver_hosted"
			if cmdline, err := os.ReadFile(dir + "/cmdline"); err == nil && mgmtPort != "" &&
				strings.Contains(string(cmdline), "--secure-port="+mgmtPort+"\x00") {
				role = "apiserver_mgmt"
			}
		case comm == "etcd":
			role = "etcd"
		case comm == "registry":
			role = "registry"
		default:
			continue
		}
		out[role] += processCPUSeconds(pid)
	}
	return out
}
