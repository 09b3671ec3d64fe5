package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// Version is paylock's version as "paylock version" prints it: cmd/paylock
// sets it from -ldflags "-X main.version=..."; empty, it is the module's
// version from the build information, else "dev".
var Version = ""

const versionUsage = `Usage: paylock version [--json]

Prints the build's identity: paylock's version (the module version "go
install" or a VCS build stamps, or -X main.version), the commit it was
built from, that commit's time, whether the tree had uncommitted changes
("dirty"), and the Go release that built it. The serve start-up log line
carries the same text. --json prints the same fields as one JSON object.
A binary built without VCS information (go build -buildvcs=false, or
outside a checkout) has no revision, time or dirty flag.
`

// versionInfo is a build's identity, read from its debug.BuildInfo.
type versionInfo struct {
	Version   string `json:"version"`            // module version, the -X override, or "dev"
	Revision  string `json:"revision,omitempty"` // vcs.revision: the commit built
	Time      string `json:"time,omitempty"`     // vcs.time: the commit's time, RFC 3339
	Modified  bool   `json:"modified"`           // vcs.modified: the tree had uncommitted changes
	GoVersion string `json:"go,omitempty"`       // the Go release that built the binary
}

// readVersion is the identity of a build: bi as debug.ReadBuildInfo
// returns it (nil when the binary has none), override as -X main.version
// set it (empty when not).
func readVersion(bi *debug.BuildInfo, override string) versionInfo {
	v := versionInfo{Version: override}
	if bi != nil {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		v.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	return v
}

// String is the one-line form "paylock version" prints after "paylock ",
// and the start-up log line's version: "v1.2.0 (revision 0123…,
// 2026-01-02T03:04:05Z, dirty, go1.26.0)", the parts the build lacks left
// out.
func (v versionInfo) String() string {
	var parts []string
	if v.Revision != "" {
		parts = append(parts, "revision "+v.Revision)
	}
	if v.Time != "" {
		parts = append(parts, v.Time)
	}
	if v.Modified {
		parts = append(parts, "dirty")
	}
	if v.GoVersion != "" {
		parts = append(parts, v.GoVersion)
	}
	if len(parts) == 0 {
		return v.Version
	}
	return v.Version + " (" + strings.Join(parts, ", ") + ")"
}

// currentVersion is this binary's identity.
func currentVersion() versionInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return readVersion(bi, Version)
}

// buildVersion is this binary's version alone (the telemetry resource's
// service.version, the API's root document).
func buildVersion() string { return currentVersion().Version }

// runVersion implements "paylock version [--json]".
func runVersion(stdout, stderr io.Writer, args []string) int {
	fs := flag.NewFlagSet("paylock version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the fields as one JSON object")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, versionUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "paylock version: %v\n\n%s", err, versionUsage)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "paylock version: unexpected argument %q\n\n%s", fs.Arg(0), versionUsage)
		return exitUsage
	}
	v := currentVersion()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(v); err != nil {
			fmt.Fprintf(stderr, "paylock version: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	fmt.Fprintln(stdout, "paylock", v)
	return exitOK
}
