// Command udpecho answers every UDP datagram it receives on ADDRESS with the same
// bytes: the UDP server of the tests of pods' hostPorts, where busybox has none. Built
// static (CGO_ENABLED=0), it runs in a busybox image from a hostPath volume.
package main

import (
	"fmt"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: udpecho ADDRESS")
		os.Exit(2)
	}
	conn, err := net.ListenPacket("udp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buf := make([]byte, 64<<10)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		conn.WriteTo(buf[:n], from)
	}
}
