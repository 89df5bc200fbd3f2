/* A Cyclone DDS C peer of the dds adapter's interop test, built by the test with
 * Debian's idlc and gcc against cyclonedds-dev, on the same IDL as the adapter
 * (tests/integration/adapters/dds/vehicle.idl).
 *
 *   c_peer pub TOPIC DOMAIN COUNT WAIT_S   writes COUNT vehicle::State samples once a
 *                                          reader matched, then waits for stdin to close
 *   c_peer sub TOPIC DOMAIN COUNT WAIT_S   prints the first COUNT samples it takes, one
 *                                          per line (a JSON object), within WAIT_S
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dds/dds.h"
#include "vehicle.h"

static const char *GEARS[] = {"PARK", "REVERSE", "NEUTRAL", "DRIVE"};

static dds_qos_t *reliable(void) {
  dds_qos_t *qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(10));
  dds_qset_history(qos, DDS_HISTORY_KEEP_ALL, 0);
  return qos;
}

static int publish(dds_entity_t participant, dds_entity_t topic, int count, int wait_s) {
  dds_qos_t *qos = reliable();
  dds_entity_t writer = dds_create_writer(participant, topic, qos, NULL);
  dds_delete_qos(qos);
  if (writer < 0) { fprintf(stderr, "writer: %s\n", dds_strretcode(writer)); return 1; }
  dds_publication_matched_status_t status = {0};
  dds_time_t deadline = dds_time() + DDS_SECS(wait_s);
  while (dds_time() < deadline) {
    dds_get_publication_matched_status(writer, &status);
    if (status.current_count > 0) break;
    dds_sleepfor(DDS_MSECS(20));
  }
  if (status.current_count == 0) { fprintf(stderr, "no reader matched\n"); return 1; }
  static vehicle_Wheel wheels[2] = {{1, 220.5f}, {2, 230.25f}};
  static char *tags[2] = {"from", "c"};
  for (int i = 0; i < count; i++) {
    vehicle_State s;
    memset(&s, 0, sizeof s);
    snprintf(s.vin, sizeof s.vin, "CPEER%d", i % 3);
    s.seq = (uint64_t) i;
    s.gear = vehicle_REVERSE;
    s.velocity.x = i * 0.5; s.velocity.y = -1.25; s.velocity.z = 1e-3;
    s.wheels._buffer = wheels; s.wheels._length = 2; s.wheels._maximum = 2;
    s.reading._d = 2; s.reading._u.text = "c text";
    s.tags._buffer = tags; s.tags._length = 2; s.tags._maximum = 2;
    dds_return_t rc = dds_write(writer, &s);
    if (rc != DDS_RETCODE_OK) { fprintf(stderr, "write: %s\n", dds_strretcode(rc)); return 1; }
  }
  dds_wait_for_acks(writer, DDS_SECS(wait_s));
  printf("written %d\n", count);
  fflush(stdout);
  while (getchar() != EOF) {}
  return 0;
}

static void print_sample(const vehicle_State *s) {
  printf("{\"vin\":\"%s\",\"seq\":%" PRIu64 ",\"gear\":\"%s\",\"velocity\":[%.17g,%.17g,%.17g],"
         "\"wheels\":[", s->vin, s->seq, GEARS[s->gear], s->velocity.x, s->velocity.y,
         s->velocity.z);
  for (uint32_t i = 0; i < s->wheels._length; i++)
    printf("%s[%u,%.9g]", i ? "," : "", s->wheels._buffer[i].index,
           s->wheels._buffer[i].pressure_kpa);
  printf("],\"reading\":[%d,", s->reading._d);
  if (s->reading._d == 1) printf("%.17g", s->reading._u.number);
  else if (s->reading._d == 2) printf("\"%s\"", s->reading._u.text);
  else if (s->reading._d == 3) printf("%u", s->reading._u.raw._length);
  else printf("%d", s->reading._u.code);
  printf("],\"tags\":[");
  for (uint32_t i = 0; i < s->tags._length; i++)
    printf("%s\"%s\"", i ? "," : "", s->tags._buffer[i]);
  printf("]}\n");
  fflush(stdout);
}

static int subscribe(dds_entity_t participant, dds_entity_t topic, int count, int wait_s) {
  dds_qos_t *qos = reliable();
  dds_entity_t reader = dds_create_reader(participant, topic, qos, NULL);
  dds_delete_qos(qos);
  if (reader < 0) { fprintf(stderr, "reader: %s\n", dds_strretcode(reader)); return 1; }
  printf("ready\n");
  fflush(stdout);
  void *samples[1] = {NULL};
  dds_sample_info_t info;
  int got = 0;
  dds_time_t deadline = dds_time() + DDS_SECS(wait_s);
  while (got < count && dds_time() < deadline) {
    dds_return_t n = dds_take(reader, samples, &info, 1, 1);
    if (n > 0 && info.valid_data) {
      print_sample((const vehicle_State *) samples[0]);
      got++;
    }
    if (n > 0) dds_return_loan(reader, samples, n);
    else dds_sleepfor(DDS_MSECS(5));
  }
  return got == count ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage: pub|sub TOPIC DOMAIN COUNT WAIT_S\n"); return 2; }
  dds_entity_t participant = dds_create_participant((dds_domainid_t) atoi(argv[3]), NULL, NULL);
  if (participant < 0) { fprintf(stderr, "participant: %s\n", dds_strretcode(participant)); return 1; }
  dds_entity_t topic = dds_create_topic(participant, &vehicle_State_desc, argv[2], NULL, NULL);
  if (topic < 0) { fprintf(stderr, "topic: %s\n", dds_strretcode(topic)); return 1; }
  int rc = strcmp(argv[1], "pub") == 0
    ? publish(participant, topic, atoi(argv[4]), atoi(argv[5]))
    : subscribe(participant, topic, atoi(argv[4]), atoi(argv[5]));
  dds_delete(participant);
  return rc;
}
