package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of /proc CPU times.
const clockTick = 10 * time.Millisecond

// cpuSample is a snapshot of CPU time consumed so far.
type cpuSample struct {
	At                      time.Time
	MachineBusy, MachineAll time.Duration                    // all CPUs, from /proc/stat
	Self                    time.Duration                    // this process: the load generator
	Children                time.Duration                    // waited-for children (pgbench)
	Groups                  map[string]map[int]time.Duration // selected processes, by group and pid
}

// cpuUse is the CPU time spent between two samples.
type cpuUse struct {
	Wall        time.Duration
	MachineBusy time.Duration // every process and the kernel, all CPUs
	MachineAll  time.Duration // busy + idle, all CPUs
	Generator   time.Duration
	Children    time.Duration
	Groups      map[string]time.Duration // the selected processes, by group
}

// Busy is the share of the machine's CPUs that were busy.
func (u cpuUse) Busy() float64 {
	if u.MachineAll == 0 {
		return 0
	}
	return float64(u.MachineBusy) / float64(u.MachineAll)
}

// takeCPU samples the machine, this process, its children and the
// processes of groups.
func takeCPU(groups map[string][]int) cpuSample {
	s := cpuSample{At: time.Now(), Groups: map[string]map[int]time.Duration{}}
	s.MachineBusy, s.MachineAll = machineCPU()
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.Self = tv(ru.Utime) + tv(ru.Stime)
	}
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		s.Children = tv(ru.Utime) + tv(ru.Stime)
	}
	for g, pids := range groups {
		s.Groups[g] = map[int]time.Duration{}
		for _, p := range pids {
			if d, ok := procCPU(p); ok {
				s.Groups[g][p] = d
			}
		}
	}
	return s
}

// since returns the use from a to b; processes missing from either are
// left out.
func (b cpuSample) since(a cpuSample) cpuUse {
	u := cpuUse{
		Wall:        b.At.Sub(a.At),
		MachineBusy: b.MachineBusy - a.MachineBusy,
		MachineAll:  b.MachineAll - a.MachineAll,
		Generator:   b.Self - a.Self,
		Children:    b.Children - a.Children,
		Groups:      map[string]time.Duration{},
	}
	for g, procs := range b.Groups {
		for p, d := range procs {
			if d0, ok := a.Groups[g][p]; ok {
				u.Groups[g] += d - d0
			}
		}
	}
	return u
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// machineCPU reads the first line of /proc/stat: busy (user, nice, system,
// irq, softirq, steal) and all (busy + idle + iowait) time of every CPU.
func machineCPU() (busy, all time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	var v [8]int64
	for i := range v {
		v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
	}
	user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	bz := user + nice + system + irq + softirq + steal
	return time.Duration(bz) * clockTick, time.Duration(bz+idle+iowait) * clockTick
}

// procCPU reads a process's user + system time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: fields are
	// counted after its closing parenthesis (state is field 3).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(ut+st) * clockTick, true
}

// procName returns a process's command name, "" when it is not on this
// machine (or not visible).
func procName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
