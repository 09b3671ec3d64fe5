package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paylock/paylock/internal/testkit"
	"github.com/paylock/paylock/lock"
)

// TLS and passwords in every Redis mode, against real redis-server
// processes this test starts with a CA of its own: a standalone server
// (rediss://), a one-node cluster and a master watched by one sentinel.

type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "paylock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serverFiles writes the CA and a server certificate for 127.0.0.1 and
// localhost into dir.
func (ca testCA) serverFiles(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "redis.pem"), filepath.Join(dir, "redis.key")
	for f, b := range map[string][]byte{
		caFile:   ca.certPEM,
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return caFile, certFile, keyFile
}

// freePort returns a loopback port nobody listens on, below the kernel's
// ephemeral range (where an outgoing connection could take it before
// redis-server binds it), and with bus, one whose port+10000 is free too.
func freePort(t *testing.T, bus bool) int {
	t.Helper()
	free := func(p int) bool {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		ln.Close()
		return true
	}
	for i := range 200 {
		p := 12000 + (int(time.Now().UnixNano())+i*7919)%9000
		if free(p) && (!bus || free(p+10000)) {
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// startRedis runs redis-server with args until the test ends and waits
// until its TLS port accepts connections.
func startRedis(t *testing.T, port int, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testkit.Missing(t, "redis-server is not installed (apt-get install redis-server)")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testkit.Eventually(t, 5*time.Second, fmt.Sprintf("redis-server %v: port %d open", args, port), func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
		}
		return err
	})
}

func tlsArgs(port int, caFile, certFile, keyFile string) []string {
	return []string{"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile,
		"--tls-auth-clients", "no", "--save", "", "--appendonly", "no"}
}

// useLock obtains, refreshes and releases a lock on a few keys through
// the client cfg builds.
func useLock(t *testing.T, cfg Config) {
	t.Helper()
	rdb, err := cfg.Lock.Redis.open()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cfg.Lock.Redis.checkMode(ctx, rdb); err != nil {
		t.Fatalf("mode check: %v", err)
	}
	l := lock.New(rdb)
	for i := range 5 {
		var lk *lock.Lock
		// A new cluster or a sentinel's first answer can take a moment.
		testkit.Eventually(t, 5*time.Second, "Obtain over TLS", func(ctx context.Context) error {
			lk, err = l.Obtain(ctx, fmt.Sprintf("tls-test:%d", i), time.Minute)
			return err
		})
		if err := lk.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("Refresh over TLS: %v", err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release over TLS: %v", err)
		}
	}
}

func TestRedisTLSAndPasswordsInEveryMode(t *testing.T) {
	ca := newTestCA(t)
	caFile, certFile, keyFile := ca.serverFiles(t, t.TempDir())
	const password = "tls-test-password"

	t.Run("standalone", func(t *testing.T) {
		port := freePort(t, false)
		startRedis(t, port, append(tlsArgs(port, caFile, certFile, keyFile), "--requirepass", password)...)
		useLock(t, mustConfig(t, map[string]string{
			"REDIS_URL":                 "rediss://127.0.0.1:" + strconv.Itoa(port) + "/0",
			"PAYLOCK_REDIS_PASSWORD":    password,
			"PAYLOCK_REDIS_TLS_CA_FILE": caFile,
		}))
		// Without the CA the server's certificate is not trusted.
		rdb, _ := openRedis(mustConfig(t, map[string]string{"REDIS_URL": "rediss://:" + password + "@127.0.0.1:" + strconv.Itoa(port) + "/0"}))
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// On a loaded machine the handshake can outlast the client's dial
		// timeout before the certificate is even checked: only a timeout is
		// tried again.
		err := rdb.Ping(ctx).Err()
		for i := 0; i < 10 && err != nil && strings.Contains(err.Error(), "deadline exceeded") && ctx.Err() == nil; i++ {
			err = rdb.Ping(ctx).Err()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("Ping without the CA: %v, want a certificate error", err)
		}
	})

	t.Run("cluster", func(t *testing.T) {
		port := freePort(t, true)
		dir := t.TempDir()
		startRedis(t, port, append(tlsArgs(port, caFile, certFile, keyFile),
			"--requirepass", password, "--masterauth", password,
			"--cluster-enabled", "yes", "--tls-cluster", "yes", "--tls-replication", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"))...)
		admin := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), Password: password,
			TLSConfig: mustTLS(t, caFile)})
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := admin.ClusterAddSlotsRange(ctx, 0, 16383).Err(); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "the one-node cluster ok", func(ctx context.Context) error {
			info, err := admin.ClusterInfo(ctx).Result()
			if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = fmt.Errorf("%s", info)
			}
			return err
		})
		useLock(t, mustConfig(t, map[string]string{
			"PAYLOCK_REDIS_MODE":        "cluster",
			"PAYLOCK_REDIS_ADDRS":       "127.0.0.1:" + strconv.Itoa(port),
			"PAYLOCK_REDIS_PASSWORD":    password,
			"PAYLOCK_REDIS_TLS":         "true",
			"PAYLOCK_REDIS_TLS_CA_FILE": caFile,
		}))
	})

	t.Run("sentinel", func(t *testing.T) {
		const sentinelPassword = "tls-test-sentinel-password"
		master, sentinel := freePort(t, false), freePort(t, false)
		startRedis(t, master, append(tlsArgs(master, caFile, certFile, keyFile),
			"--requirepass", password, "--tls-replication", "yes")...)
		conf := filepath.Join(t.TempDir(), "sentinel.conf")
		err := os.WriteFile(conf, []byte(strings.Join([]string{
			"port 0", "tls-port " + strconv.Itoa(sentinel), "bind 127.0.0.1",
			"tls-cert-file " + certFile, "tls-key-file " + keyFile, "tls-ca-cert-file " + caFile,
			"tls-auth-clients no", "tls-replication yes", "requirepass " + sentinelPassword,
			"sentinel monitor paylock 127.0.0.1 " + strconv.Itoa(master) + " 1",
			"sentinel auth-pass paylock " + password, "",
		}, "\n")), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		startRedis(t, sentinel, conf, "--sentinel")
		useLock(t, mustConfig(t, map[string]string{
			"PAYLOCK_REDIS_MODE":              "sentinel",
			"PAYLOCK_REDIS_SENTINEL_MASTER":   "paylock",
			"PAYLOCK_REDIS_SENTINEL_ADDRS":    "127.0.0.1:" + strconv.Itoa(sentinel),
			"PAYLOCK_REDIS_PASSWORD":          password,
			"PAYLOCK_REDIS_SENTINEL_PASSWORD": sentinelPassword,
			"PAYLOCK_REDIS_TLS":               "true",
			"PAYLOCK_REDIS_TLS_CA_FILE":       caFile,
		}))
	})
}

func mustTLS(t *testing.T, caFile string) *tls.Config {
	t.Helper()
	tc, err := (&RedisConfig{TLS: true, TLSCAFile: caFile}).tlsConfig("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return tc
}
