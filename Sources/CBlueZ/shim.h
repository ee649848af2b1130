// libbluetooth (BlueZ) socket definitions: AF_BLUETOOTH, HCI user channel, L2CAP.
// The shim exists so SwiftPM can find the headers via pkg-config and so Swift sees the constants
// and ioctls that are function-like macros in C (HCIDEVDOWN is _IOW('H', 202, int)).
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <string.h>
#include <errno.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>
#include <bluetooth/l2cap.h>

#ifndef HCI_CHANNEL_USER
#define HCI_CHANNEL_USER 1
#endif

static inline int cbluez_hci_channel_user(void) { return HCI_CHANNEL_USER; }

/// Brings HCI device `dev` down (the kernel stack lets go of it). Returns 0 or -1 with errno.
static inline int cbluez_hci_dev_down(int fd, int dev) { return ioctl(fd, HCIDEVDOWN, dev); }

/// Binds a raw HCI socket to device `dev` on the user channel. Returns 0 or -1 with errno.
static inline int cbluez_hci_bind_user_channel(int fd, int dev) {
    struct sockaddr_hci addr;
    memset(&addr, 0, sizeof(addr));
    addr.hci_family = AF_BLUETOOTH;
    addr.hci_dev = (unsigned short)dev;
    addr.hci_channel = HCI_CHANNEL_USER;
    return bind(fd, (struct sockaddr *)&addr, sizeof(addr));
}

/// Opens a raw HCI socket (AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI). Returns the fd or -1 with errno.
static inline int cbluez_hci_socket(void) {
    return socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI);
}
