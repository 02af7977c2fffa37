package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where a run happened.
type Machine struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpuModel,omitempty"`
	MemoryMiB  int64  `json:"memoryMiB,omitempty"`
	LoadAvg    string `json:"loadAvg,omitempty"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Kubernetes string `json:"kubernetes"`
	Hostname   string `json:"hostname,omitempty"`
}

func describeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	m.Hostname, _ = os.Hostname()
	m.CPUModel = firstField("/proc/cpuinfo", "model name")
	if kb := firstField("/proc/meminfo", "MemTotal"); kb != "" {
		if v, err := strconv.ParseInt(strings.Fields(kb)[0], 10, 64); err == nil {
			m.MemoryMiB = v / 1024
		}
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}

// firstField returns the value of the first "key: value" line for key.
func firstField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
