package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/paylock/paylock/lock"
	"github.com/redis/go-redis/v9"
)

// The Redis deployments paylock talks to, chosen by PAYLOCK_REDIS_MODE.
// Each builds one concrete client type: go-redis's NewUniversalClient is
// never used, because it silently builds a cluster client whenever it is
// given more than one address.
const (
	redisStandalone = lock.ModeStandalone // REDIS_URL: one server (or a proxy that looks like one)
	redisCluster    = lock.ModeCluster    // PAYLOCK_REDIS_ADDRS: seed nodes of a Redis Cluster
	redisSentinel   = lock.ModeSentinel   // PAYLOCK_REDIS_SENTINEL_MASTER at PAYLOCK_REDIS_SENTINEL_ADDRS
)

func parseRedisMode(v string) error {
	switch v {
	case redisStandalone, redisCluster, redisSentinel:
		return nil
	}
	return errors.New("want standalone, cluster or sentinel")
}

// parseAddrs reads a comma-separated list of host:port.
func parseAddrs(v string) ([]string, error) {
	addrs := splitList(v)
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("%q is not host:port", a)
		}
	}
	return addrs, nil
}

// checkRedisConfig refuses settings that belong to another mode than the
// one chosen, so that a cluster or a sentinel group is never used (or
// missed) by accident. It names the variable at fault.
func checkRedisConfig(c config) error {
	mode := c.RedisMode
	if mode == "" {
		mode = redisStandalone
	}
	set := map[string]bool{
		"PAYLOCK_REDIS_ADDRS":           len(c.RedisAddrs) > 0,
		"PAYLOCK_REDIS_SENTINEL_MASTER": c.RedisSentinelMaster != "",
		"PAYLOCK_REDIS_SENTINEL_ADDRS":  len(c.RedisSentinelAddrs) > 0,
	}
	want := map[string][]string{
		redisStandalone: nil,
		redisCluster:    {"PAYLOCK_REDIS_ADDRS"},
		redisSentinel:   {"PAYLOCK_REDIS_SENTINEL_MASTER", "PAYLOCK_REDIS_SENTINEL_ADDRS"},
	}[mode]
	for _, name := range []string{"PAYLOCK_REDIS_ADDRS", "PAYLOCK_REDIS_SENTINEL_MASTER", "PAYLOCK_REDIS_SENTINEL_ADDRS"} {
		wanted := false
		for _, w := range want {
			wanted = wanted || w == name
		}
		switch {
		case wanted && !set[name]:
			return fmt.Errorf("invalid %s: must be set when PAYLOCK_REDIS_MODE=%s", name, mode)
		case !wanted && set[name]:
			return fmt.Errorf("invalid %s: not used when PAYLOCK_REDIS_MODE=%s (set PAYLOCK_REDIS_MODE to use it)", name, mode)
		}
	}
	if mode == redisStandalone {
		opt, err := redis.ParseURL(c.RedisURL)
		if err != nil {
			return fmt.Errorf("invalid REDIS_URL: %v", err)
		}
		if c.RedisTLS && opt.TLSConfig == nil {
			return errors.New("invalid PAYLOCK_REDIS_TLS=true: REDIS_URL is redis://; use rediss:// for TLS in standalone mode")
		}
	}
	tlsOn := c.RedisTLS
	if mode == redisStandalone {
		tlsOn = strings.HasPrefix(c.RedisURL, "rediss://")
	}
	if !tlsOn && (c.RedisTLSCAFile != "" || c.RedisTLSServerName != "") {
		return errors.New("invalid PAYLOCK_REDIS_TLS_CA_FILE/SERVER_NAME: TLS is off (PAYLOCK_REDIS_TLS=true, or rediss:// in standalone mode)")
	}
	if (c.RedisSentinelUsername != "" || c.RedisSentinelPassword != "") && mode != redisSentinel {
		return fmt.Errorf("invalid PAYLOCK_REDIS_SENTINEL_PASSWORD/USERNAME: not used when PAYLOCK_REDIS_MODE=%s", mode)
	}
	return nil
}

// newRedis builds the lock's Redis client for cfg.RedisMode: a *redis.Client
// for standalone and sentinel (a failover client that follows the master the
// sentinels name), a *redis.ClusterClient for cluster. In every mode
// ContextTimeoutEnabled makes the request's context bound every command, and
// the dial/read/write timeouts sit well below the lock TTL, so a slow Redis
// cannot hold a request past its deadline; PAYLOCK_REDIS_USERNAME/PASSWORD
// and TLS apply to every node.
func newRedis(cfg config) (redis.UniversalClient, error) {
	switch cfg.RedisMode {
	case "", redisStandalone:
		opt, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("invalid REDIS_URL: %w", err)
		}
		if cfg.RedisUsername != "" {
			opt.Username = cfg.RedisUsername
		}
		if cfg.RedisPassword != "" {
			opt.Password = cfg.RedisPassword
		}
		if opt.TLSConfig != nil {
			if err := addRedisCA(opt.TLSConfig, cfg); err != nil {
				return nil, err
			}
			if cfg.RedisTLSServerName != "" {
				opt.TLSConfig.ServerName = cfg.RedisTLSServerName
			}
		}
		opt.ContextTimeoutEnabled = true
		// go-redis's default of 5 dial retries 100ms apart would hold every
		// delivery ~0.7s before the Redis-down policy applies.
		opt.DialerRetries = 1
		opt.DialTimeout = cfg.RedisTimeout
		opt.ReadTimeout = cfg.RedisTimeout
		opt.WriteTimeout = cfg.RedisTimeout
		return redis.NewClient(opt), nil

	case redisCluster:
		tlsConfig, err := redisTLS(cfg, cfg.RedisAddrs[0])
		if err != nil {
			return nil, err
		}
		return redis.NewClusterClient(&redis.ClusterOptions{
			DialerRetries:         1,
			Addrs:                 cfg.RedisAddrs,
			Username:              cfg.RedisUsername,
			Password:              cfg.RedisPassword,
			TLSConfig:             tlsConfig,
			ContextTimeoutEnabled: true,
			DialTimeout:           cfg.RedisTimeout,
			ReadTimeout:           cfg.RedisTimeout,
			WriteTimeout:          cfg.RedisTimeout,
		}), nil

	case redisSentinel:
		tlsConfig, err := redisTLS(cfg, cfg.RedisSentinelAddrs[0])
		if err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			DialerRetries:         1,
			MasterName:            cfg.RedisSentinelMaster,
			SentinelAddrs:         cfg.RedisSentinelAddrs,
			SentinelUsername:      cfg.RedisSentinelUsername,
			SentinelPassword:      cfg.RedisSentinelPassword,
			Username:              cfg.RedisUsername,
			Password:              cfg.RedisPassword,
			TLSConfig:             tlsConfig,
			ContextTimeoutEnabled: true,
			DialTimeout:           cfg.RedisTimeout,
			ReadTimeout:           cfg.RedisTimeout,
			WriteTimeout:          cfg.RedisTimeout,
		}), nil
	}
	return nil, fmt.Errorf("invalid PAYLOCK_REDIS_MODE=%q", cfg.RedisMode)
}

// redisTLS returns the TLS configuration of cluster and sentinel modes, or
// nil without PAYLOCK_REDIS_TLS. The server name defaults to the host of
// the first address, as go-redis does for a rediss:// URL.
func redisTLS(cfg config, firstAddr string) (*tls.Config, error) {
	if !cfg.RedisTLS {
		return nil, nil
	}
	host, _, _ := net.SplitHostPort(firstAddr)
	tc := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if cfg.RedisTLSServerName != "" {
		tc.ServerName = cfg.RedisTLSServerName
	}
	return tc, addRedisCA(tc, cfg)
}

// addRedisCA makes tc trust the certificates in PAYLOCK_REDIS_TLS_CA_FILE
// instead of the system's, when it is set.
func addRedisCA(tc *tls.Config, cfg config) error {
	if cfg.RedisTLSCAFile == "" {
		return nil
	}
	pem, err := os.ReadFile(cfg.RedisTLSCAFile)
	if err != nil {
		return fmt.Errorf("invalid PAYLOCK_REDIS_TLS_CA_FILE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("invalid PAYLOCK_REDIS_TLS_CA_FILE=%q: no PEM certificate in it", cfg.RedisTLSCAFile)
	}
	tc.RootCAs = pool
	return nil
}

// errRedisMode means the server answers as another kind of deployment than
// PAYLOCK_REDIS_MODE says.
var errRedisMode = errors.New("redis mode mismatch")

// checkRedisMode has lock.CheckMode ask the server which kind of
// deployment it is and, when that contradicts mode, returns an error
// wrapping errRedisMode that says which settings to use instead. Other
// errors only mean the check could not be made.
func checkRedisMode(ctx context.Context, rdb redis.UniversalClient, mode string) error {
	if mode == "" {
		mode = redisStandalone
	}
	err := lock.CheckMode(ctx, rdb, mode)
	var me *lock.ModeError
	if !errors.As(err, &me) {
		return err
	}
	hint := map[string]string{
		redisCluster:  "set PAYLOCK_REDIS_MODE=cluster and PAYLOCK_REDIS_ADDRS",
		redisSentinel: "set PAYLOCK_REDIS_MODE=sentinel, PAYLOCK_REDIS_SENTINEL_MASTER and PAYLOCK_REDIS_SENTINEL_ADDRS",
	}[me.Got]
	if hint == "" {
		hint = "check PAYLOCK_REDIS_MODE"
	}
	return fmt.Errorf("%w: PAYLOCK_REDIS_MODE=%s but the server reports redis_mode:%s: %s", errRedisMode, mode, me.Got, hint)
}

// redisLogger sends go-redis's own messages (failed dials, pool and cluster
// state warnings: the noise of a failover) to paylock's structured log,
// instead of plain text on stderr.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, "redis client", slog.String("detail", fmt.Sprintf(format, v...)))
}

// logRedisTo routes go-redis's messages to logger. go-redis has one logger
// per process; the last call wins.
func logRedisTo(logger *slog.Logger) { redis.SetLogger(redisLogger{logger}) }
