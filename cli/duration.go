package cli

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// errDuration is parseDuration's refusal; the caller names the flag or
// the variable.
var errDuration = errors.New("want a duration such as 90s, 15m, 72h, 3d or 1d12h")

// parseDuration reads every duration paylock takes, flag or variable: Go's
// syntax (time.ParseDuration: "90s", "1h30m", "-5m", "0") plus days, d,
// as 24h each, alone or before the other units ("3d", "1d12h", "1.5d").
// A day is always 24 hours: these are ages and windows, not calendar
// dates.
func parseDuration(v string) (time.Duration, error) {
	s := v
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil || n < 0 || strings.ContainsAny(s[:i], "eExXpP_+-") || math.IsInf(n, 0) || math.IsNaN(n) {
			return 0, errDuration
		}
		if n*24*float64(time.Hour) > math.MaxInt64 {
			return 0, errDuration
		}
		days = time.Duration(n * 24 * float64(time.Hour))
		s = s[i+1:]
		if s == "" {
			if neg {
				days = -days
			}
			return days, nil
		}
	}
	rest, err := time.ParseDuration(s)
	if err != nil || (days > 0 && s[0] == '0' && len(s) == 1) || rest < 0 || days > math.MaxInt64-rest {
		return 0, errDuration
	}
	d := days + rest
	if neg {
		d = -d
	}
	return d, nil
}

// parseNonNegative is parseDuration refusing a negative duration: an age,
// a window or a timeout.
func parseNonNegative(v string) (time.Duration, error) {
	d, err := parseDuration(v)
	if err == nil && d < 0 {
		return 0, errors.New("must not be negative")
	}
	return d, err
}
