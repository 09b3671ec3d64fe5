package lock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/lock"
)

// infoReply answers INFO with a fixed text, as a server of some mode would.
type infoReply string

func (r infoReply) Info(ctx context.Context, _ ...string) *redis.StringCmd {
	return redis.NewStringResult(string(r), nil)
}

func TestCheckModeRefusesAServerOfAnotherMode(t *testing.T) {
	info := func(mode string) infoReply {
		return infoReply("# Server\r\nredis_version:7.2.4\r\nredis_mode:" + mode + "\r\nos:Linux\r\n")
	}
	for _, c := range []struct {
		want   string
		server infoReply
		got    string // "" when the check passes
	}{
		{lock.ModeStandalone, info("standalone"), ""},
		{lock.ModeCluster, info("cluster"), ""},
		{lock.ModeSentinel, info("standalone"), ""}, // the failover client talks to the master
		{lock.ModeStandalone, infoReply("# Server\r\nredis_version:7.2.4\r\n"), ""},
		{lock.ModeStandalone, info("cluster"), "cluster"},
		{lock.ModeStandalone, info("sentinel"), "sentinel"},
		{lock.ModeCluster, info("standalone"), "standalone"},
		{lock.ModeSentinel, info("sentinel"), "sentinel"},
	} {
		err := lock.CheckMode(context.Background(), c.server, c.want)
		var me *lock.ModeError
		switch {
		case c.got == "" && err != nil:
			t.Errorf("%s client, server %q: %v, want nil", c.want, c.server, err)
		case c.got != "" && (!errors.Is(err, lock.ErrWrongMode) || !errors.As(err, &me) || me.Want != c.want || me.Got != c.got):
			t.Errorf("%s client, server %q: %v, want a *ModeError{%s, %s}", c.want, c.server, err, c.want, c.got)
		}
	}
}

func TestCheckModeReportsAFailedINFOAsIs(t *testing.T) {
	refused := errors.New("NOPERM this user has no permissions to run the 'info' command")
	err := lock.CheckMode(context.Background(), infoError{refused}, lock.ModeStandalone)
	if !errors.Is(err, refused) || errors.Is(err, lock.ErrWrongMode) {
		t.Fatalf("got %v, want the INFO error itself", err)
	}
}

type infoError struct{ err error }

func (e infoError) Info(ctx context.Context, _ ...string) *redis.StringCmd {
	return redis.NewStringResult("", e.err)
}

func TestPingSaysWhetherRedisAnswers(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	l := lock.New(rdb)
	if err := l.Ping(context.Background()); err != nil {
		t.Fatalf("Ping a running server: %v", err)
	}
	mr.Close()
	if err := l.Ping(context.Background()); err == nil {
		t.Fatal("Ping a stopped server: nil")
	}
}
