// Memory latency on this machine: a dependent pointer chase over a random cycle of SIZE bytes.
//   cc -O2 -o /tmp/chase Tools/Benchmarks/Latency/chase.c && /tmp/chase 268435456
// Used for the per-upsert scaling bound in Tools/Benchmarks/README.md (issue 5).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <stdint.h>
int main(int argc,char**argv){ size_t n=(size_t)atol(argv[1])/8; uint64_t*a=malloc(n*8); 
 for(size_t i=0;i<n;i++)a[i]=i; for(size_t i=n-1;i>0;i--){size_t j=((uint64_t)rand()*RAND_MAX+rand())%i; uint64_t t=a[i];a[i]=a[j];a[j]=t;}
 /* make a single cycle following the permutation order */ uint64_t*next=malloc(n*8); for(size_t i=0;i<n;i++) next[a[i]]=a[(i+1)%n];
 struct timespec s,e; size_t p=0, k=20000000; clock_gettime(CLOCK_MONOTONIC,&s); for(size_t i=0;i<k;i++) p=next[p]; clock_gettime(CLOCK_MONOTONIC,&e);
 printf("%zu MB: %.1f ns per dependent load (%zu)\n", n*8>>20, ((e.tv_sec-s.tv_sec)*1e9+(e.tv_nsec-s.tv_nsec))/k, p); }
