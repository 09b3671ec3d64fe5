package main

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

func numCPU() int { return runtime.NumCPU() }

func goVersion() string { return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH }

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func cpuModel() string { return procField("/proc/cpuinfo", "model name") }

func memTotal() string {
	v := procField("/proc/meminfo", "MemTotal")
	kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	if err != nil {
		return v
	}
	return strconv.FormatFloat(float64(kb)/(1<<20), 'f', 1, 64) + " GiB"
}

func kernel() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return "unknown"
	}
	str := func(b [65]int8) string {
		var s []byte
		for _, c := range b {
			if c == 0 {
				break
			}
			s = append(s, byte(c))
		}
		return string(s)
	}
	return str(u.Sysname) + " " + str(u.Release)
}
