package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/lock"
	"github.com/paylock/paylock/source"
)

// RedisConfig is the Redis deployment the lock uses, chosen explicitly by
// PAYLOCK_REDIS_MODE. Each mode builds one concrete client type (open):
// go-redis's NewUniversalClient is never used, because it silently builds
// a cluster client whenever it is given more than one address.
type RedisConfig struct {
	URL              string        // REDIS_URL: standalone mode
	Timeout          time.Duration // PAYLOCK_REDIS_TIMEOUT: dial, read and write
	Mode             string        // PAYLOCK_REDIS_MODE: redisStandalone, redisCluster or redisSentinel
	Addrs            []string      // PAYLOCK_REDIS_ADDRS: cluster seed nodes
	SentinelMaster   string        // PAYLOCK_REDIS_SENTINEL_MASTER
	SentinelAddrs    []string      // PAYLOCK_REDIS_SENTINEL_ADDRS
	Username         string        // PAYLOCK_REDIS_USERNAME
	Password         string        // PAYLOCK_REDIS_PASSWORD; never printed
	SentinelUsername string        // PAYLOCK_REDIS_SENTINEL_USERNAME
	SentinelPassword string        // PAYLOCK_REDIS_SENTINEL_PASSWORD; never printed
	TLS              bool          // PAYLOCK_REDIS_TLS: cluster and sentinel modes
	TLSCAFile        string        // PAYLOCK_REDIS_TLS_CA_FILE
	TLSServerName    string        // PAYLOCK_REDIS_TLS_SERVER_NAME
}

// The Redis deployments, as PAYLOCK_REDIS_MODE names them.
const (
	redisStandalone = lock.ModeStandalone // REDIS_URL: one server (or a proxy that looks like one)
	redisCluster    = lock.ModeCluster    // PAYLOCK_REDIS_ADDRS: seed nodes of a Redis Cluster
	redisSentinel   = lock.ModeSentinel   // PAYLOCK_REDIS_SENTINEL_MASTER at PAYLOCK_REDIS_SENTINEL_ADDRS
)

func (c *RedisConfig) settings() []setting {
	return []setting{
		{env: "REDIS_URL", flag: "redis-url", def: "redis://127.0.0.1:6379/0", usage: "Redis URL (redis:// or rediss://)",
			parse: func(v string) error {
				c.URL = v
				if _, err := redis.ParseURL(v); err != nil {
					var ue *url.Error
					if errors.As(err, &ue) {
						err = ue.Err // the url.Error would repeat the URL, password and all
					}
					return err
				}
				return nil
			}},
		{env: "PAYLOCK_REDIS_TIMEOUT", flag: "redis-timeout", def: "500ms", usage: "Redis dial/read/write timeout (well below the lock TTL)",
			parse: durationAtLeast(&c.Timeout, time.Millisecond)},
		{env: "PAYLOCK_REDIS_MODE", flag: "redis-mode", def: "standalone", usage: "Redis deployment: standalone (REDIS_URL), cluster (PAYLOCK_REDIS_ADDRS) or sentinel (PAYLOCK_REDIS_SENTINEL_*)",
			parse: func(v string) error { c.Mode = v; return parseRedisMode(v) }},
		{env: "PAYLOCK_REDIS_ADDRS", flag: "redis-addrs", usage: "cluster mode: comma-separated host:port of seed nodes",
			parse: func(v string) (err error) { c.Addrs, err = parseAddrs(v); return err }},
		{env: "PAYLOCK_REDIS_SENTINEL_MASTER", flag: "redis-sentinel-master", usage: "sentinel mode: the master's name as the sentinels know it",
			parse: text(&c.SentinelMaster)},
		{env: "PAYLOCK_REDIS_SENTINEL_ADDRS", flag: "redis-sentinel-addrs", usage: "sentinel mode: comma-separated host:port of the sentinels",
			parse: func(v string) (err error) { c.SentinelAddrs, err = parseAddrs(v); return err }},
		{env: "PAYLOCK_REDIS_USERNAME", flag: "redis-username", usage: "Redis ACL user (cluster and sentinel modes; overrides REDIS_URL's in standalone)",
			parse: text(&c.Username)},
		{env: "PAYLOCK_REDIS_PASSWORD", flag: "redis-password", secret: true, usage: "Redis password (cluster nodes, the sentinels' master and replicas; overrides REDIS_URL's in standalone)",
			parse: text(&c.Password)},
		{env: "PAYLOCK_REDIS_SENTINEL_USERNAME", flag: "redis-sentinel-username", usage: "sentinel mode: ACL user of the sentinels themselves",
			parse: text(&c.SentinelUsername)},
		{env: "PAYLOCK_REDIS_SENTINEL_PASSWORD", flag: "redis-sentinel-password", secret: true, usage: "sentinel mode: password of the sentinels themselves",
			parse: text(&c.SentinelPassword)},
		{env: "PAYLOCK_REDIS_TLS", flag: "redis-tls", def: "false", usage: "TLS to Redis in cluster and sentinel modes (standalone: use rediss://)",
			parse: boolean(&c.TLS)},
		{env: "PAYLOCK_REDIS_TLS_CA_FILE", flag: "redis-tls-ca-file", usage: "PEM file of the CAs to trust for Redis TLS (empty: the system's)",
			parse: text(&c.TLSCAFile)},
		{env: "PAYLOCK_REDIS_TLS_SERVER_NAME", flag: "redis-tls-server-name", usage: "name the Redis certificates must carry (empty: the first address's host)",
			parse: text(&c.TLSServerName)},
	}
}

func (c *RedisConfig) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("redis_mode", c.Mode),
		slog.Any("redis_addrs", c.Addrs),
		slog.String("redis_sentinel_master", c.SentinelMaster),
		slog.Any("redis_sentinel_addrs", c.SentinelAddrs),
		slog.Bool("redis_tls", c.TLS),
	}
}

func parseRedisMode(v string) error {
	switch v {
	case redisStandalone, redisCluster, redisSentinel:
		return nil
	}
	return errors.New("want standalone, cluster or sentinel")
}

// parseAddrs reads a comma-separated list of host:port.
func parseAddrs(v string) ([]string, error) {
	addrs := source.SplitList(v)
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("%q is not host:port", a)
		}
	}
	return addrs, nil
}

// validate refuses settings that belong to another mode than the one
// chosen, so that a cluster or a sentinel group is never used (or missed)
// by accident. It names the variable at fault.
func (c *RedisConfig) validate() error {
	mode := c.Mode
	if mode == "" {
		mode = redisStandalone
	}
	set := map[string]bool{
		"PAYLOCK_REDIS_ADDRS":           len(c.Addrs) > 0,
		"PAYLOCK_REDIS_SENTINEL_MASTER": c.SentinelMaster != "",
		"PAYLOCK_REDIS_SENTINEL_ADDRS":  len(c.SentinelAddrs) > 0,
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
		opt, err := redis.ParseURL(c.URL)
		if err != nil {
			return fmt.Errorf("invalid REDIS_URL: %v", err)
		}
		if c.TLS && opt.TLSConfig == nil {
			return errors.New("invalid PAYLOCK_REDIS_TLS=true: REDIS_URL is redis://; use rediss:// for TLS in standalone mode")
		}
	}
	tlsOn := c.TLS
	if mode == redisStandalone {
		tlsOn = strings.HasPrefix(c.URL, "rediss://")
	}
	if !tlsOn && (c.TLSCAFile != "" || c.TLSServerName != "") {
		return errors.New("invalid PAYLOCK_REDIS_TLS_CA_FILE/SERVER_NAME: TLS is off (PAYLOCK_REDIS_TLS=true, or rediss:// in standalone mode)")
	}
	if (c.SentinelUsername != "" || c.SentinelPassword != "") && mode != redisSentinel {
		return fmt.Errorf("invalid PAYLOCK_REDIS_SENTINEL_PASSWORD/USERNAME: not used when PAYLOCK_REDIS_MODE=%s", mode)
	}
	return nil
}

// open builds the lock's Redis client for c.Mode: a *redis.Client
// for standalone and sentinel (a failover client that follows the master the
// sentinels name), a *redis.ClusterClient for cluster. In every mode
// ContextTimeoutEnabled makes the request's context bound every command, and
// the dial/read/write timeouts sit well below the lock TTL, so a slow Redis
// cannot hold a request past its deadline; PAYLOCK_REDIS_USERNAME/PASSWORD
// and TLS apply to every node.
func (c *RedisConfig) open() (redis.UniversalClient, error) {
	switch c.Mode {
	case "", redisStandalone:
		opt, err := redis.ParseURL(c.URL)
		if err != nil {
			return nil, fmt.Errorf("invalid REDIS_URL: %w", err)
		}
		if c.Username != "" {
			opt.Username = c.Username
		}
		if c.Password != "" {
			opt.Password = c.Password
		}
		if opt.TLSConfig != nil {
			if err := c.addCA(opt.TLSConfig); err != nil {
				return nil, err
			}
			if c.TLSServerName != "" {
				opt.TLSConfig.ServerName = c.TLSServerName
			}
		}
		opt.ContextTimeoutEnabled = true
		// go-redis's default of 5 dial retries 100ms apart would hold every
		// delivery ~0.7s before the Redis-down policy applies.
		opt.DialerRetries = 1
		opt.DialTimeout = c.Timeout
		opt.ReadTimeout = c.Timeout
		opt.WriteTimeout = c.Timeout
		return redis.NewClient(opt), nil

	case redisCluster:
		tlsConfig, err := c.tlsConfig(c.Addrs[0])
		if err != nil {
			return nil, err
		}
		return redis.NewClusterClient(&redis.ClusterOptions{
			DialerRetries:         1,
			Addrs:                 c.Addrs,
			Username:              c.Username,
			Password:              c.Password,
			TLSConfig:             tlsConfig,
			ContextTimeoutEnabled: true,
			DialTimeout:           c.Timeout,
			ReadTimeout:           c.Timeout,
			WriteTimeout:          c.Timeout,
		}), nil

	case redisSentinel:
		tlsConfig, err := c.tlsConfig(c.SentinelAddrs[0])
		if err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			DialerRetries:         1,
			MasterName:            c.SentinelMaster,
			SentinelAddrs:         c.SentinelAddrs,
			SentinelUsername:      c.SentinelUsername,
			SentinelPassword:      c.SentinelPassword,
			Username:              c.Username,
			Password:              c.Password,
			TLSConfig:             tlsConfig,
			ContextTimeoutEnabled: true,
			DialTimeout:           c.Timeout,
			ReadTimeout:           c.Timeout,
			WriteTimeout:          c.Timeout,
		}), nil
	}
	return nil, fmt.Errorf("invalid PAYLOCK_REDIS_MODE=%q", c.Mode)
}

// tlsConfig returns the TLS configuration of cluster and sentinel modes, or
// nil without PAYLOCK_REDIS_TLS. The server name defaults to the host of
// the first address, as go-redis does for a rediss:// URL.
func (c *RedisConfig) tlsConfig(firstAddr string) (*tls.Config, error) {
	if !c.TLS {
		return nil, nil
	}
	host, _, _ := net.SplitHostPort(firstAddr)
	tc := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if c.TLSServerName != "" {
		tc.ServerName = c.TLSServerName
	}
	return tc, c.addCA(tc)
}

// addCA makes tc trust the certificates in PAYLOCK_REDIS_TLS_CA_FILE
// instead of the system's, when it is set.
func (c *RedisConfig) addCA(tc *tls.Config) error {
	if c.TLSCAFile == "" {
		return nil
	}
	pem, err := os.ReadFile(c.TLSCAFile)
	if err != nil {
		return fmt.Errorf("invalid PAYLOCK_REDIS_TLS_CA_FILE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("invalid PAYLOCK_REDIS_TLS_CA_FILE=%q: no PEM certificate in it", c.TLSCAFile)
	}
	tc.RootCAs = pool
	return nil
}

// errRedisMode means the server answers as another kind of deployment than
// PAYLOCK_REDIS_MODE says.
var errRedisMode = errors.New("redis mode mismatch")

// checkMode has lock.CheckMode ask the server which kind of
// deployment it is and, when that contradicts c.Mode, returns an error
// wrapping errRedisMode that says which settings to use instead. Other
// errors only mean the check could not be made.
func (c *RedisConfig) checkMode(ctx context.Context, rdb redis.UniversalClient) error {
	mode := c.Mode
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
