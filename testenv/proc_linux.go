package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// findChild returns the PID of this process's child whose argv[0] is binary
// and whose arguments include arg.
func findChild(binary, arg string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("testenv: find %s: %w", filepath.Base(binary), err)
	}
	self := os.Getpid()
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		if ppid(pid) != self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline"))
		if err != nil {
			continue // exited meanwhile
		}
		argv := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if len(argv) > 0 && argv[0] == binary && slices.Contains(argv[1:], arg) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("testenv: no running %s with %s among this process's children", filepath.Base(binary), arg)
}

// ppid reads the parent PID from /proc/<pid>/stat ("pid (comm) state ppid …";
// comm may contain spaces and parentheses, so parse after the last ')').
func ppid(pid int) int {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(string(raw[i+1:]))
	if len(fields) < 2 {
		return -1
	}
	p, err := strconv.Atoi(fields[1])
	if err != nil {
		return -1
	}
	return p
}

// exited reports whether pid has exited (gone, or a zombie not yet reaped).
func exited(pid int) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(raw, ')')
	fields := strings.Fields(string(raw[i+1:]))
	return len(fields) == 0 || fields[0] == "Z" || fields[0] == "X"
}
