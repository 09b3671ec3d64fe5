package lock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The kinds of Redis deployment, as a server names itself in INFO server
// (redis_mode) and as a client is built for one: a client of a standalone
// server (or a proxy that looks like one), a cluster client, or a failover
// client that follows the master its sentinels name.
const (
	ModeStandalone = "standalone"
	ModeCluster    = "cluster"
	ModeSentinel   = "sentinel"
)

// ErrWrongMode is wrapped by the *ModeError of CheckMode: the server is
// another kind of deployment than the client was built for.
var ErrWrongMode = errors.New("lock: redis server of another mode")

// ModeError says which kind of deployment a client was built for (Want) and
// which the server reports (Got).
type ModeError struct {
	Want string // ModeStandalone, ModeCluster or ModeSentinel
	Got  string // the server's redis_mode
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("%v: built for %s, the server reports redis_mode:%s", ErrWrongMode, e.Want, e.Got)
}

func (e *ModeError) Unwrap() error { return ErrWrongMode }

// InfoClient is what CheckMode needs of a go-redis client.
type InfoClient interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

// CheckMode asks the server which kind of deployment it is (INFO server,
// redis_mode) and returns a *ModeError when that contradicts want: a
// standalone client given one node of a cluster would meet MOVED for most
// keys, one given a sentinel would have every lock command refused. A
// sentinel-mode client talks to the master itself, which reports
// standalone. A server that does not say is taken at its word. Other errors
// (Redis unreachable, INFO not allowed) mean only that the check could not
// be made.
func CheckMode(ctx context.Context, c InfoClient, want string) error {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	got := ""
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "redis_mode:"); ok {
			got = v
		}
	}
	server := want
	if want == ModeSentinel {
		server = ModeStandalone
	}
	if got == "" || got == server {
		return nil
	}
	return &ModeError{Want: want, Got: got}
}
