// Command kfakebroker runs an in-process Kafka cluster (franz-go's kfake)
// as a process of its own, for the chaos scenarios and demos where no real
// Kafka is at hand: --brokers brokers on loopback, a topic seeded with
// --partitions partitions, and optionally lost acks: a fraction
// (--drop-acks) of produce requests is appended and then answered
// REQUEST_TIMED_OUT, as a broker whose answer was lost. It writes one
// "host:port" per broker, comma-separated, to --addr-file once it listens,
// and runs until SIGTERM or SIGINT. With --tls-dir it speaks only TLS, with
// a throwaway CA and server certificate (internal/certtest) it writes
// there first: ca.pem is what clients trust (tls_ca=DIR/ca.pem).
//
//	kfakebroker --brokers 3 --topic payments --partitions 6 --drop-acks 0.1 --addr-file /tmp/kafka.addrs
//	kfakebroker --tls-dir /tmp/kafka-tls --addr-file /tmp/kafka.addrs
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paylock/paylock/internal/certtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kfakebroker:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.Int("brokers", 3, "brokers in the cluster")
	topic := flag.String("topic", "payments", "topic to create")
	partitions := flag.Int("partitions", 6, "the topic's partitions")
	dropAcks := flag.Float64("drop-acks", 0, "fraction of produce requests appended, then answered REQUEST_TIMED_OUT (a lost ack)")
	addrFile := flag.String("addr-file", "", "write the brokers' addresses here once listening")
	tlsDir := flag.String("tls-dir", "", "speak only TLS, with a throwaway CA and certificate written to this directory (ca.pem)")
	flag.Parse()
	if *dropAcks < 0 || *dropAcks >= 1 {
		return fmt.Errorf("--drop-acks %v: want 0 <= rate < 1", *dropAcks)
	}
	opts := []kfake.Opt{kfake.NumBrokers(*brokers), kfake.SeedTopics(int32(*partitions), *topic)}
	if *tlsDir != "" {
		f, err := certtest.Write(*tlsDir)
		if err != nil {
			return err
		}
		tc, err := f.ServerConfig(false)
		if err != nil {
			return err
		}
		opts = append(opts, kfake.TLS(tc))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	if *dropAcks > 0 {
		rate := *dropAcks
		c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: *topic, Err: kerr.RequestTimedOut, Count: -1,
			When: func(kmsg.Request) bool { return rand.Float64() < rate }}) // #nosec G404: a fault's dice
	}
	addrs := strings.Join(c.ListenAddrs(), ",")
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(addrs+"\n"), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "kfakebroker: %d brokers at %s, topic %s (%d partitions), drop-acks %v, tls %t\n", *brokers, addrs, *topic, *partitions, *dropAcks, *tlsDir != "")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	return nil
}
