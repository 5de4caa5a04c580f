{ spry for Free Pascal: a memory manager unit. Put it first in the program's
  uses clause:

    program prog;
    uses spry, cthreads, Classes, SysUtils;

  and build with  fpc -Fu<repo>/pascal -Fl<directory holding libspry.a> prog.pas
  The program is then linked with libspry.a and needs no libspry.so at run
  time. With -dSPRY_SHARED it is linked with libspry.so instead (-Fl names
  the directory holding libspry.so; at run time the loader must find it:
  LD_LIBRARY_PATH, -k-rpath=<dir>, or an installed spry). With -dSPRY_DEBUG
  it is linked with libspry-debug.so, the cautious build: overruns, writes
  after free, double frees and leaks are reported with stacks (README,
  "Cautious mode"); the same run-time note applies.

  What each entry of the TMemoryManager does (the RTL's semantics, from
  rtl/inc/heap.inc of FPC 3.2.2):
  - GetMem(0) returns a unique pointer, as SysGetMem does (spry_malloc(0));
  - FreeMem(nil) does nothing; FreeMem returns 0 (cmem does the same; the
    RTL heap returns the chunk size, which no caller in the RTL reads);
  - FreeMemSize(p, 0) does nothing, as SysFreeMemSize does (it exits before
    freeing); other sizes free through spry_free_sized, which is never hurt
    by a wrong size (the RTL heap ignores the size, and so does spry);
  - ReAllocMem(p, 0) frees p and sets it to nil; ReAllocMem(nil, n)
    allocates; otherwise spry_realloc, the contents kept up to the smaller
    size; p is updated and returned;
  - AllocMem zeroes (spry_calloc);
  - MemSize is spry_usable_size: O(1), no lock, no size in front of blocks
    (the RTL's AnsiString SetLength calls it on nearly every append);
  - out of memory: runerror 203 (EOutOfMemory with SysUtils), as the RTL
    heap does, or nil when ReturnNilIfGrowHeapFails is set; ReAllocMem then
    leaves p as it was;
  - GetHeapStatus and GetFPCHeapStatus come from spry_stats_get (see below);
  - InitThread, DoneThread and RelocateHeap are not needed: spry's heaps are
    per thread through native TLS, and every FPC thread ends through
    pthread_exit (cthreads: ThreadMain and EndThread both call DoneThread,
    then pthread_exit), where spry's pthread key destructor makes the
    thread's heap dormant for the next new thread. TThread.WaitFor joins the
    thread, so after it the heap is released.

  Order with cthreads: both orders work.
  - uses spry, cthreads: spry is installed first; cthreads' initialization
    (InitCTLS, threadvar setup) runs under spry; the RTL's RelocateHeap then
    finds MemoryManager.RelocateHeap = nil and does nothing more.
  - uses cthreads, spry: cthreads sets up threads with the RTL heap, which
    allocates nothing there; spry is installed next.
  Anything that the RTL heap holds when spry is installed (nothing, in both
  orders above; a unit placed before spry may leave blocks) stays valid:
  spry then installs a careful variant that hands pointers spry does not own
  back to the RTL heap.

  heaptrc (-gh) installs itself before every unit of the uses clause and
  calls the RTL heap directly; it cannot sit on top of spry. When spry finds
  another memory manager installed already (heaptrc, cmem), it leaves that
  manager in place, says so on stderr (unless SPRY_VERBOSE=0), and
  SpryInstalled is false: the program runs, heaptrc's report is right, spry
  is not used.

  The unit is never uninstalled: blocks spry handed out may still be freed
  by the finalization of units that come later in the shutdown order. }
unit spry;

{$mode fpc}
{$macro on}

interface

{$if not defined(CPUX86_64) or not defined(LINUX)}
  {$fatal spry: Linux x86-64 only, as spry itself}
{$endif}

{$ifdef SPRY_DEBUG}
  { the cautious build (README, "Cautious mode"): its spry_* entries check
    every block; shared only, as it needs libunwind and libdw }
  {$define SPRY_EXTERNAL := external 'spry-debug'}
{$else}
{$ifdef SPRY_SHARED}
  {$define SPRY_EXTERNAL := external 'spry'}
{$else}
  {$define SPRY_EXTERNAL := external}
  {$linklib spry, static}
  { libspry.a needs libc (pthreads and dlsym are in libc from glibc 2.34;
    pthread and dl keep older ones working) and libgcc (__popcountdi2) }
  {$linklib pthread}
  {$linklib dl}
  {$linklib gcc}
{$endif}
{$endif}
{$linklib c}

type
  { spry_stats_t of include/spry.h, field for field }
  TSpryStats = record
    mapped, committed, committed_peak, in_use, huge_in_use, dirty,
    purged_total, purges, budget_purges, segments, arenas, heaps,
    heaps_abandoned, foreign_frees, errors: SizeUInt;
  end;
  PSpryStats = ^TSpryStats;

{ spry's C API (include/spry.h), for programs that want it directly }
function  spry_malloc(size: SizeUInt): Pointer; cdecl; SPRY_EXTERNAL name 'spry_malloc';
function  spry_calloc(count, size: SizeUInt): Pointer; cdecl; SPRY_EXTERNAL name 'spry_calloc';
function  spry_realloc(p: Pointer; size: SizeUInt): Pointer; cdecl; SPRY_EXTERNAL name 'spry_realloc';
procedure spry_free(p: Pointer); cdecl; SPRY_EXTERNAL name 'spry_free';
procedure spry_free_sized(p: Pointer; size: SizeUInt); cdecl; SPRY_EXTERNAL name 'spry_free_sized';
function  spry_usable_size(p: Pointer): SizeUInt; cdecl; SPRY_EXTERNAL name 'spry_usable_size';
function  spry_good_size(size: SizeUInt): SizeUInt; cdecl; SPRY_EXTERNAL name 'spry_good_size';
function  spry_owns(p: Pointer): ByteBool; cdecl; SPRY_EXTERNAL name 'spry_owns';
procedure spry_trim; cdecl; SPRY_EXTERNAL name 'spry_trim';
procedure spry_stats_get(out_: PSpryStats); cdecl; SPRY_EXTERNAL name 'spry_stats_get';
procedure spry_stats_print(fd: LongInt); cdecl; SPRY_EXTERNAL name 'spry_stats_print';
function  spry_option_get(name: PChar): PtrInt; cdecl; SPRY_EXTERNAL name 'spry_option_get';

{ True when spry serves GetMem/FreeMem (false when another memory manager
  was installed before this unit's initialization, see above). }
function SpryInstalled: Boolean;
{ True when the careful variant is installed (the RTL heap held blocks when
  spry was installed; pointers spry does not own go back to it). }
function SpryCareful: Boolean;

implementation

function c_write(fd: LongInt; buf: Pointer; n: SizeUInt): PtrInt; cdecl; external name 'write';

var
  Installed: Boolean = False;
  Careful: Boolean = False;
  { the manager in place before spry: the RTL heap, for the careful variant }
  Previous: TMemoryManager;

function SpryInstalled: Boolean;
begin
  SpryInstalled := Installed;
end;

function SpryCareful: Boolean;
begin
  SpryCareful := Careful;
end;

{ Out of memory: the RTL heap's answer (heap.inc: HandleError(203) unless
  ReturnNilIfGrowHeapFails). Kept out of the callers' fast paths. }
function OutOfMemory: Pointer;
begin
  if not ReturnNilIfGrowHeapFails then
    RunError(203);
  OutOfMemory := nil;
end;

{ GetMem and AllocMem need a frame only to test for nil: in assembler they
  are 6 instructions around the C call where fpc -O2 makes 8 (it keeps the
  result in a callee-saved register). FPC's x86-64 register convention is
  the System V ABI, as cdecl (compiler/x86_64/cpupara.pas: the same
  parameter registers and volatile set unless the Windows ABI applies), so
  size is in rdi already and the result comes back in rax. rsp is 8 off
  16-byte alignment on entry: the sub restores it for the C call. }
function SpryGetMem(size: PtrUInt): Pointer; assembler; nostackframe;
asm
  sub    $8, %rsp
  call   spry_malloc
  add    $8, %rsp
  test   %rax, %rax
  jz     OutOfMemory         { tail call: its result is GetMem's }
end;

function SpryFreeMem(p: Pointer): PtrUInt;
begin
  spry_free(p);
  SpryFreeMem := 0;
end;

function SpryFreeMemSize(p: Pointer; size: PtrUInt): PtrUInt;
begin
  { SysFreeMemSize: size 0 frees nothing }
  if size <> 0 then
    spry_free_sized(p, size);
  SpryFreeMemSize := 0;
end;

function SpryAllocMem(size: PtrUInt): Pointer; assembler; nostackframe;
asm
  sub    $8, %rsp
  mov    $1, %esi
  call   spry_calloc
  add    $8, %rsp
  test   %rax, %rax
  jz     OutOfMemory
end;

{ Growth of a block that must move goes at least to twice its usable size
  (below GrowCap). The RTL grows an AnsiString by exactly the piece appended
  (SetLength asks MemSize first and reallocates only when the string no
  longer fits): with spry's size classes (8 a doubling) a string grown 20
  bytes at a time passes a class every few appends, and each move copies it
  and leaves a block of the class behind in the thread's block cache. Once
  above 32 KiB spry_realloc itself moves such a block into a span of its
  own and grows it in place from then on, so this matters below that: one
  move a doubling instead of eight (with spans from 16 KiB, the seed-001
  string builders measured the same with the doubling stopped there). }
const
  GrowCap = 1 shl 20;

function SpryReAllocMem(var p: Pointer; size: PtrUInt): Pointer;
var
  q: Pointer;
  old: PtrUInt;
begin
  if size = 0 then
    begin
      if p <> nil then
        begin
          spry_free(p);
          p := nil;
        end;
    end
  else if p = nil then
    begin
      p := spry_malloc(size);
      if p = nil then
        p := OutOfMemory;
    end
  else
    begin
      old := spry_usable_size(p);
      if (size > old) and (old < GrowCap) and (size < 2 * old) then
        size := 2 * old;
      q := spry_realloc(p, size);
      if q = nil then
        OutOfMemory          { p is left as it was }
      else
        p := q;
    end;
  SpryReAllocMem := p;
end;

type
  TMemSizeFunc = function(p: Pointer): PtrUInt;

function Clamp32(v: SizeUInt): Cardinal;
begin
  if v > High(Cardinal) then
    Clamp32 := High(Cardinal)
  else
    Clamp32 := v;
end;

{ spry's counters, read once; free = committed - in use (never below 0:
  the counters are read one by one while other threads work). }
procedure ReadStats(var s: TSpryStats; var free: SizeUInt);
begin
  spry_stats_get(@s);
  if s.committed > s.in_use then
    free := s.committed - s.in_use
  else
    begin
      free := 0;
      s.committed := s.in_use;
    end;
  if s.committed_peak < s.committed then
    s.committed_peak := s.committed;
  if s.mapped < s.committed then
    s.mapped := s.committed;
end;

{ TFPCHeapStatus, for the whole process (the RTL heap's is per thread):
  CurrHeapSize = committed (memory that may be resident), CurrHeapUsed =
  in_use (bytes in pages and blocks handed to heaps), CurrHeapFree = the
  difference, MaxHeapSize = committed_peak. spry keeps no peak of in_use:
  MaxHeapUsed is committed_peak too, an upper bound. }
function SpryGetFPCHeapStatus: TFPCHeapStatus;
var
  s: TSpryStats;
  free: SizeUInt;
begin
  ReadStats(s, free);
  SpryGetFPCHeapStatus.MaxHeapSize := s.committed_peak;
  SpryGetFPCHeapStatus.MaxHeapUsed := s.committed_peak;
  SpryGetFPCHeapStatus.CurrHeapSize := s.committed;
  SpryGetFPCHeapStatus.CurrHeapUsed := s.in_use;
  SpryGetFPCHeapStatus.CurrHeapFree := free;
end;

{ THeapStatus (Delphi's; 32-bit fields, clamped): TotalAddrSpace = mapped
  = TotalCommitted + TotalUncommitted; TotalCommitted = TotalAllocated +
  TotalFree; TotalFree = Unused (free pages not yet given back); FreeSmall,
  FreeBig, Overhead, HeapErrorCode 0. }
function SpryGetHeapStatus: THeapStatus;
var
  s: TSpryStats;
  free: SizeUInt;
  r: THeapStatus;
begin
  ReadStats(s, free);
  FillChar(r, SizeOf(r), 0);
  r.TotalAddrSpace := Clamp32(s.mapped);
  r.TotalCommitted := Clamp32(s.committed);
  r.TotalUncommitted := Clamp32(s.mapped - s.committed);
  r.TotalAllocated := Clamp32(s.in_use);
  r.TotalFree := Clamp32(free);
  r.Unused := r.TotalFree;
  SpryGetHeapStatus := r;
end;

{ ---- the careful variant: blocks of the previous manager go back to it --- }

function CarefulFreeMem(p: Pointer): PtrUInt;
begin
  if (p = nil) or spry_owns(p) then
    CarefulFreeMem := SpryFreeMem(p)
  else
    CarefulFreeMem := Previous.FreeMem(p);
end;

function CarefulFreeMemSize(p: Pointer; size: PtrUInt): PtrUInt;
begin
  if (p = nil) or spry_owns(p) then
    CarefulFreeMemSize := SpryFreeMemSize(p, size)
  else
    CarefulFreeMemSize := Previous.FreeMemSize(p, size);
end;

function CarefulMemSize(p: Pointer): PtrUInt;
begin
  if (p = nil) or spry_owns(p) then
    CarefulMemSize := spry_usable_size(p)
  else
    CarefulMemSize := Previous.MemSize(p);
end;

function CarefulReAllocMem(var p: Pointer; size: PtrUInt): Pointer;
var
  q: Pointer;
  n: PtrUInt;
begin
  if (p = nil) or spry_owns(p) then
    begin
      CarefulReAllocMem := SpryReAllocMem(p, size);
      exit;
    end;
  { the previous manager's block moves into spry (or is freed) }
  if size = 0 then
    begin
      Previous.FreeMem(p);
      p := nil;
      CarefulReAllocMem := nil;
      exit;
    end;
  q := SpryGetMem(size);
  if q <> nil then
    begin
      n := Previous.MemSize(p);
      if n > size then
        n := size;
      Move(p^, q^, n);
      Previous.FreeMem(p);
      p := q;
    end;
  CarefulReAllocMem := p;
end;

procedure Install;
var
  mm: TMemoryManager;
  verbose: PtrInt;
const
  note: PChar = 'spry: another memory manager (heaptrc, cmem?) was installed ' +
    'before the spry unit; spry leaves it in place'#10;
begin
  GetMemoryManager(Previous);
  if IsMemoryManagerSet then
    begin
      verbose := spry_option_get('SPRY_VERBOSE');
      if verbose <> 0 then
        begin
          { stdio may not be open yet, and must not allocate: fd 2 directly }
          c_write(2, note, StrLen(note));
        end;
      exit;
    end;
  FillChar(mm, SizeOf(mm), 0);
  mm.NeedLock := False;
  mm.GetMem := @SpryGetMem;
  mm.FreeMem := @SpryFreeMem;
  mm.FreeMemSize := @SpryFreeMemSize;
  mm.AllocMem := @SpryAllocMem;
  mm.ReAllocMem := @SpryReAllocMem;
  { MemSize is spry_usable_size itself: the RTL's procedure variables use
    the x86-64 System V convention, as cdecl does, so no wrapper is needed
    (the RTL's AnsiString SetLength calls MemSize on nearly every append) }
  mm.MemSize := TMemSizeFunc(Pointer(@spry_usable_size));
  mm.GetHeapStatus := @SpryGetHeapStatus;
  mm.GetFPCHeapStatus := @SpryGetFPCHeapStatus;
  { blocks live in the RTL heap (a unit before spry allocated): they go
    back to it }
  if Previous.GetFPCHeapStatus().CurrHeapUsed <> 0 then
    begin
      Careful := True;
      mm.FreeMem := @CarefulFreeMem;
      mm.FreeMemSize := @CarefulFreeMemSize;
      mm.ReAllocMem := @CarefulReAllocMem;
      mm.MemSize := @CarefulMemSize;
    end;
  SetMemoryManager(mm);
  Installed := True;
end;

initialization
  Install;
end.
